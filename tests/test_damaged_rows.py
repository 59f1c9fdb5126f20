"""A transcript row damaged outside sessionstore (issue #35), on both engines, from the console script.

A message's stored content set to `{not json` directly in the database: `doctor` names the row and
says what `--repair` cannot do; `view`, `show` and the markdown and HTML exports stop with one line
naming the message and exit 1, never a traceback; the jsonl export writes every line as valid JSON,
the damaged content as its raw stored text (a JSON string) marked `"damaged"`, and warns.
"""

from __future__ import annotations

import json
from pathlib import Path

import sqlalchemy as sa

from sessionstore.storage.engine.db import make_engine
from tests.support.outside import private_env, sessionstore

SPOTTER = "claude-code/spotter/258c7280-ae70-4798-800f-63464d01a85d.jsonl"
DAMAGE = "{not json"


def _damage(url: str, sid: str, seq: int) -> str:
    """Overwrite one message's stored content (packed or not) with text that is not JSON; returns its uuid."""
    engine = make_engine(url)
    try:
        with engine.begin() as conn:
            conn.execute(
                sa.text("UPDATE messages SET content_json = :c WHERE session_id = :s AND seq = :q"),
                {"c": DAMAGE, "s": sid, "q": seq},
            )
            return str(
                conn.execute(
                    sa.text("SELECT uuid FROM messages WHERE session_id = :s AND seq = :q"), {"s": sid, "q": seq}
                ).scalar_one()
            )
    finally:
        engine.dispose()


def test_a_damaged_row_gives_one_line_and_exit_1_and_a_valid_jsonl(
    store_url: str, transcripts_dir: Path, tmp_path: Path
) -> None:
    env = private_env(tmp_path / "home")
    assert sessionstore(store_url, env, "import", "claude-code", str(transcripts_dir / SPOTTER)).code == 0
    [session] = json.loads(sessionstore(store_url, env, "sessions", "--json").out)
    sid = session["id"]
    in_view = json.loads(sessionstore(store_url, env, "view", sid, "--json").out)["entries"][-2]["seq"]
    uuid = _damage(store_url, sid, in_view)

    for args in (("doctor",), ("doctor", "--repair")):
        ran = sessionstore(store_url, env, *args)
        assert ran.code == 1 and not ran.traceback, ran.err
        assert "damaged_row" in ran.out and f"message seq {in_view}" in ran.out and "--repair cannot" in ran.out

    for args in (
        ("view", sid),
        ("show", sid, str(in_view)),
        ("export", sid, "-f", "markdown"),
        ("export", sid, "-f", "html"),
    ):
        ran = sessionstore(store_url, env, *args)
        assert ran.code == 1 and not ran.traceback, (args, ran.err)
        assert ran.err.count("\n") == 1 and f"message seq {in_view} ({uuid})" in ran.err, (args, ran.err)

    ran = sessionstore(store_url, env, "export", sid, "-f", "jsonl")
    assert ran.code == 0 and not ran.traceback, ran.err
    lines = [json.loads(line) for line in ran.out.splitlines()]
    assert len(lines) == session["messages"]
    [damaged] = [line for line in lines if "damaged" in line]
    assert (damaged["seq"], damaged["damaged"], damaged["message"]["content"]) == (in_view, ["content"], DAMAGE)
    assert f"message seq {in_view} ({uuid}) is damaged" in ran.err

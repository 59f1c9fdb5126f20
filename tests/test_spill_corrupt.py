"""A spilled result whose stored blob was damaged (issue #35): `spill cat` and `spill materialize` stop
with one line and exit 1 (docs/command-line.md: a corrupt blob is a runtime failure), never a traceback; `doctor`
reports it. On both engines, from the console script."""

from __future__ import annotations

import json
from pathlib import Path

import sqlalchemy as sa

from sessionstore.storage.engine.db import make_engine
from tests.support.outside import private_env, sessionstore

BIG = "".join(f"line {i}: some build output that goes on and on\n" for i in range(8000))


def _spilled_session(url: str, env: dict[str, str]) -> str:
    """A session whose one large tool result the budget layer spilled (`prepare`)."""
    sid = json.loads(sessionstore(url, env, "new", "--json").out)["id"]
    turns = [
        {"role": "user", "content": "run the build"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_big1", "name": "Bash", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_big1", "content": BIG}]},
    ]
    assert sessionstore(url, env, "append", sid, "-", stdin="\n".join(map(json.dumps, turns)) + "\n").code == 0
    assert sessionstore(url, env, "prepare", sid).code == 0
    return sid


def test_a_corrupt_blob_gives_one_line_and_exit_1(store_url: str, tmp_path: Path) -> None:
    env = private_env(tmp_path / "home")
    sid = _spilled_session(store_url, env)
    ran = sessionstore(store_url, env, "spill", "cat", sid, "toolu_big1")
    assert ran.code == 0 and ran.out == BIG, ran.err
    engine = make_engine(store_url)
    try:
        with engine.begin() as conn:
            assert conn.execute(sa.text("UPDATE blobs SET data = :d"), {"d": b"not a zlib stream"}).rowcount == 1
    finally:
        engine.dispose()
    out = tmp_path / "spills"
    for args in (("spill", "cat", sid, "toolu_big1"), ("spill", "materialize", sid, "toolu_big1", str(out))):
        ran = sessionstore(store_url, env, *args)
        assert ran.code == 1 and not ran.traceback, (args, ran.err)
        assert ran.err.count("\n") == 1 and "blob" in ran.err and "damaged" in ran.err, (args, ran.err)
    assert not out.exists() or not any(out.iterdir()), "nothing written"
    ran = sessionstore(store_url, env, "doctor")
    assert ran.code == 1 and not ran.traceback and "blob_corrupt" in ran.out, ran.out + ran.err

"""Whole rows of every session-scoped table, comparable across two sessions set up alike.

The fault-point test compares a killed write's state with the old one or with a reference run.
Comparing a chosen list of columns let a change slip through (a facts-gate report moved into a
second transaction after the commit passed every kill), so this reads every column of every
table that holds a `session_id` (past view rows included), plus the session's own row and the
blobs its spills point at. Only generated ids and times are left out: the columns named in
`GENERATED`, ISO times inside text, and uuids, which are numbered in order of first appearance
(so a uuid pointing at the wrong message still shows).
"""

from __future__ import annotations

import re
from typing import Any

from sqlalchemy import inspect

from sessionstore import SessionStore
from sessionstore.storage.codecs import textpack

UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
ISO_TIME = re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:?\d{2})?")
#: Columns whose values are generated per run: surrogate ids, the session id itself, write times.
GENERATED = frozenset({"id", "session_id", "created_at", "updated_at", "written_at", "saved_at", "pinned_at"})
#: Derived tables, written in transactions of their own by design: the search index (caught up at
#: query time) and `pipeline_states`, the pipeline's scan cache, saved after a rewrite commits and
#: used only when its view version matches (a missing or older row means a rescan, never a wrong view).
DERIVED = ("search_", "alembic_version", "pipeline_states")

_COLUMNS: dict[tuple[str, str], dict[str, list[str]]] = {}


def _session_tables(store: SessionStore) -> dict[str, list[str]]:
    """table -> its compared columns, for `sessions` and every table with a session_id (cached per URL)."""
    key = (store.url, store.db.dialect)
    if key not in _COLUMNS:
        found = {}
        inspector = inspect(store.db.engine)
        for table in sorted(inspector.get_table_names()):
            if table.startswith(DERIVED):
                continue
            names = [c["name"] for c in inspector.get_columns(table)]
            if table == "sessions" or "session_id" in names:
                found[table] = [n for n in names if n not in GENERATED]
        _COLUMNS[key] = found
    return _COLUMNS[key]


def _text(value: Any) -> Any:
    if isinstance(value, memoryview):
        value = bytes(value)
    if isinstance(value, bytes) and value[:1] == bytes((textpack.PACKED,)):
        try:  # a packed message text compares by its JSON (two runs train dictionaries of their own)
            return textpack.unpack(value)
        except textpack.TextCorrupt:
            pass
    if isinstance(value, bytes):
        return value.decode("utf-8", "backslashreplace")
    return value


def _masked(row: tuple[Any, ...]) -> str:
    """A sort key that does not depend on generated values."""
    return repr(tuple(ISO_TIME.sub("<t>", UUID.sub("<u>", v)) if isinstance(v, str) else v for v in row))


def session_rows(store: SessionStore, sid: str) -> dict[str, list[tuple[Any, ...]]]:
    """Every compared row of the session, tables by name, rows in a stable order, generated values normalized."""
    numbers: dict[str, str] = {sid: "<session>"}

    def number(match: re.Match[str]) -> str:
        return numbers.setdefault(match.group(), f"<uuid{len(numbers)}>")

    out: dict[str, list[tuple[Any, ...]]] = {}
    for table, columns in _session_tables(store).items():
        where = "id" if table == "sessions" else "session_id"
        select = ", ".join(columns) if columns else "1"
        rows = [
            tuple(_text(v) for v in r)
            for r in store.db.all(f"SELECT {select} FROM {table} WHERE {where} = :sid", {"sid": sid})
        ]
        rows.sort(key=_masked)
        out[table] = [
            tuple(ISO_TIME.sub("<t>", UUID.sub(number, v)) if isinstance(v, str) else v for v in r) for r in rows
        ]
    shas = sorted(
        {
            r[0]
            for r in store.db.all(
                "SELECT blob_sha256 FROM replacements WHERE session_id = :sid AND blob_sha256 IS NOT NULL", {"sid": sid}
            )
        }
    )
    out["blobs (referenced)"] = [
        tuple(
            _text(v)
            for v in store.db.one("SELECT sha256, size, compression, data FROM blobs WHERE sha256 = :s", {"s": sha})
            or (sha, None, None, None)
        )
        for sha in shas
    ]
    return out

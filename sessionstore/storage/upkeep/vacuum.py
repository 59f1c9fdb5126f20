"""Giving space back: `sessionstore db vacuum`.

A deleted session, a rebuilt search index or an upgrade that packed the
source lines (revision 0010) leaves free pages behind that the database keeps
for reuse; vacuuming returns them. SQLite: first the message texts are packed
with their column's dictionary where they are not yet (a store that only had
appends gets its dictionaries here: `textpack.repack`), then the WAL is
checkpointed, `VACUUM` rewrites the file, and the WAL is truncated. PostgreSQL: `VACUUM` per table of
the store (space reusable by the table; the file shrinks only where its end is
free), each table one step of the progress.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Callable

from ..codecs import textpack
from ..core.errors import StoreBusy

if TYPE_CHECKING:
    from ..engine.db import Database
    from ..store import SessionStore

#: progress(step_done, steps, what): called before each step and once when all are done.
VacuumProgress = Callable[[int, int, str], None]


@dataclass
class VacuumResult:
    """Bytes the store took before and after (SQLite: the file; PostgreSQL: its tables with indexes)."""

    bytes_before: int
    bytes_after: int

    @property
    def freed(self) -> int:
        return max(0, self.bytes_before - self.bytes_after)


def vacuum(store: "SessionStore", progress: VacuumProgress | None = None) -> VacuumResult:
    """Return the store's free space; raises StoreBusy when another connection keeps it from running."""
    db = store.db
    say = progress or (lambda _done, _steps, _what: None)
    steps: list[tuple[str, Callable[[], object]]] = []
    if db.is_sqlite:
        before = _sqlite_bytes(store)
        steps += [(f"pack {c}", partial(textpack.repack, db, c)) for c in textpack.COLUMNS]
        statements = ["PRAGMA wal_checkpoint(TRUNCATE)", "VACUUM", "PRAGMA wal_checkpoint(TRUNCATE)"]
        names = ["checkpoint", "VACUUM", "truncate WAL"]
    else:
        tables = [
            r[0]
            for r in db.all("SELECT tablename FROM pg_tables WHERE schemaname = current_schema() ORDER BY tablename")
        ]
        before = _pg_bytes(store)
        statements = [f'VACUUM "{t}"' for t in tables]
        names = [f"VACUUM {t}" for t in tables]
    steps += [(what, partial(_run, db, statement)) for what, statement in zip(names, statements, strict=True)]
    for done, (what, step) in enumerate(steps):
        say(done, len(steps), what)
        try:
            step()
        except Exception as exc:
            if db.is_transient(exc) or "locked" in str(exc) or "busy" in str(exc):
                raise StoreBusy(f"could not vacuum ({what}): the database is in use: {exc}") from exc
            raise
    say(len(steps), len(steps), "done")
    return VacuumResult(before, _sqlite_bytes(store) if db.is_sqlite else _pg_bytes(store))


def _run(db: "Database", statement: str) -> None:
    db.execute(statement).close()


def _sqlite_bytes(store: "SessionStore") -> int:
    """The main database file's size in pages, in bytes."""
    pages = int(store.db.one("PRAGMA page_count")[0])
    return pages * int(store.db.one("PRAGMA page_size")[0])


def _pg_bytes(store: "SessionStore") -> int:
    """The store's tables with their indexes and TOAST, in bytes."""
    row = store.db.one(
        "SELECT COALESCE(SUM(pg_total_relation_size(format('%I.%I', schemaname, tablename)::regclass)), 0) "
        "FROM pg_tables WHERE schemaname = current_schema()"
    )
    return int(row[0])

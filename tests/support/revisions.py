"""Test-only Alembic revisions, loaded through an extra version location (never shipped)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from alembic.script import ScriptDirectory

from sessionstore.storage.engine import migrate
from sessionstore.storage import store as store_module

TESTS = Path(__file__).resolve().parent.parent


def shipped_head() -> str:
    """The newest revision under migrations/versions."""
    return ScriptDirectory(str(migrate.MIGRATIONS_DIR)).get_current_head() or ""


def use_test_revisions(monkeypatch: pytest.MonkeyPatch, folder: str, head: str) -> str:
    """Add tests/<folder> as a version location and make `head` what opening a store upgrades to.

    Returns the shipped head, on which the folder's revision sits.
    """
    shipped_config = migrate.alembic_config

    def with_test_versions(url: str | None = None) -> Any:
        cfg = shipped_config(url)
        cfg.set_main_option("path_separator", "os")
        cfg.set_main_option(
            "version_locations", os.pathsep.join([str(migrate.MIGRATIONS_DIR / "versions"), str(TESTS / folder)])
        )
        return cfg

    monkeypatch.setattr(migrate, "alembic_config", with_test_versions)
    for module in (migrate, store_module):
        monkeypatch.setattr(module, "SCHEMA_HEAD", head)
    return shipped_head()

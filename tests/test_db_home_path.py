"""`--db sqlite:///~/x.db` means the home folder, for the driver as well as for the file it creates.

It created an empty ~/x.db, then the driver opened the literal path `~/x.db`
and failed with "unable to open database file; check that the folder exists".
"""

from __future__ import annotations

from pathlib import Path

import pytest

from sessionstore import SessionStore
from tests.support.cli import run_cli


def test_a_tilde_path_is_the_home_folder(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(work)
    made = run_cli(capsys, "new", "--title", "at home", "--db", "sqlite:///~/stores/s.db")
    assert made.code == 0, made.err
    with SessionStore.open(f"sqlite:///{home / 'stores' / 's.db'}") as st:
        assert [s["title"] for s in st.list()] == ["at home"]
    assert list(work.iterdir()) == [], "no folder named ~ in the working directory"

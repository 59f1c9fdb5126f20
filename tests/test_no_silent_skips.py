"""Under `.ci/run` a missing prerequisite fails the run instead of skipping a part of the suite.

`.ci/run` exports SESSIONSTORE_REQUIRE_TRANSCRIPTS=1 and SESSIONSTORE_REQUIRE_BROWSER=1 beside
SESSIONSTORE_REQUIRE_PG=1; the fixtures and helpers that used to skip (`transcripts_dir`,
`shared_transcripts()`, a parametrization over the transcript files, `chromium()`) then fail, so a
clone without ../shared/transcripts cannot pass with 42 files skipped.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def pytest_run(tmp_path: Path, *args: str, require: bool) -> subprocess.CompletedProcess[str]:
    """This suite's pytest on `args`, the shared transcripts pointed at a folder that does not exist."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SESSIONSTORE_REQUIRE_")}
    env["SESSIONSTORE_TRANSCRIPTS"] = str(tmp_path / "no-such-folder")
    if require:
        env["SESSIONSTORE_REQUIRE_TRANSCRIPTS"] = "1"
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-n", "0", "-q", "-p", "no:cacheprovider", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_missing_transcripts_skip_visibly_but_fail_when_required(tmp_path: Path) -> None:
    target = "tests/test_history_width.py"  # a module fixture that needs the shared transcripts
    loose = pytest_run(tmp_path, target, require=False)
    assert loose.returncode == 0 and "skipped" in loose.stdout and "failed" not in loose.stdout, loose.stdout[-2000:]
    strict = pytest_run(tmp_path, target, require=True)
    assert strict.returncode == 1, strict.stdout[-2000:]
    assert "SESSIONSTORE_REQUIRE_TRANSCRIPTS is set" in strict.stdout and "skipped" not in strict.stdout


def test_a_parametrization_over_missing_transcripts_fails_at_collection_when_required(tmp_path: Path) -> None:
    target = "tests/test_extractive.py::test_real_transcripts_keep_every_file_path"
    loose = pytest_run(tmp_path, target, require=False)
    assert loose.returncode == 0 and "1 skipped" in loose.stdout, loose.stdout[-2000:]
    strict = pytest_run(tmp_path, target, require=True)
    assert strict.returncode != 0 and "SESSIONSTORE_REQUIRE_TRANSCRIPTS is set" in strict.stdout, strict.stdout[-2000:]

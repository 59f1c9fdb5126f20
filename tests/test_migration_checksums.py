"""Released migrations are frozen: each one's file is pinned by its SHA-256, so an edit cannot slip in unseen.

A database upgraded by a released revision never runs that revision again; editing the file afterwards
would leave such databases and new ones with different schemas. A change goes in a new revision instead.

When a release ships a new revision (0010 and on), add its line to RELEASED (`sha256sum
migrations/versions/0010_*.py` gives the digest). Revisions not yet released stay out of the table, so
they can still be re-chained or fixed before they ship; the table itself must stay a gap-free run from 0001.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest

from sessionstore.storage.engine.migrate import MIGRATIONS_DIR

VERSIONS = MIGRATIONS_DIR / "versions"

#: Revision id -> (file name, SHA-256 of its bytes), for every released revision.
RELEASED: dict[str, tuple[str, str]] = {
    "0001": ("0001_initial_schema.py", "f5a222c5547732d0bbaa1098e282f0aa355bff5ad0b10a9bcfc3afd07356e9eb"),
    "0002": ("0002_search_index.py", "306643d1b87bf860ae7fe36d289e73474fe8566e7984b1b349fab3c0bcdf775e"),
    "0003": ("0003_import_lookups.py", "f4b27d4cfd4c212dcc3b120283fa6e1650bc60539336586ebc6f38d5f194354e"),
    "0004": ("0004_hot_paths.py", "365cbbe88228818aef528b93ce2dc59ad57464b0ab432b81ef347cde7d64bffc"),
    "0005": ("0005_session_lineage.py", "5a33845f64e03aa5c7027ea44663a0c038690fc341674a76045348012e1096f8"),
    "0006": ("0006_pinned_messages.py", "9ed3c49aa359c894348cac700debb983ba50a9bac1ec0948c776544c1a59a391"),
    "0007": ("0007_import_files.py", "6948578dd8a3ae320be397c91f8036d878b4c83f3574e73c1ea13c26a33f9b6d"),
    "0008": ("0008_usage.py", "febcac90656ab50187427c05704a122bf186273bb7d58bf5ef8a5522e20848f7"),
    "0009": ("0009_owners_hosts_shares.py", "33bb830037c61834cdc7f6c6ee0940e2809563c3027b76b1cc0913ecbe9606fe"),
    "0010": ("0010_packed_source_lines.py", "cff2554bc749f9d068b1d732846c278992692318c7f2a275c7c10ae8379ffd2b"),
    "0011": ("0011_search_window_pg.py", "04b4c551f551889f879e36d7dda9fcb0d12980ccc129550b1fcb1ae94a96be41"),
    "0012": ("0012_spliced_source_lines.py", "5a24ab36c8e8208033b12360b2463e165b729d97c7dcc375a73637fab4f5e405"),
    "0013": ("0013_packed_message_texts.py", "8fe4b089b86b5ee52011da03018d3afaab73815fce0a24696a3e5d55bd9d99a3"),
    "0014": ("0014_search_external_content.py", "7f8e72906e4919342a6d84a25ddd59101b8fbf53b1f6b7448b1aac05f765b8ff"),
    "0015": ("0015_source_line_blocks.py", "b479815ed14f95630b0b3ddc2993f2f05708aec6819082fb9344217918bfb7f7"),
    "0016": ("0016_packed_message_contents.py", "b4faf3ca3fe771f7a8034a4d59318bd1825fd4d7a36f67d6bb1323b9bd2147f4"),
    "0017": ("0017_shared_search_texts.py", "9e86f0682beff60ae8b31cc9b2d22d7d142a7dfd132568f158e4575bdbe793b3"),
    "0018": ("0018_search_dictionaries.py", "81fb2fa324ec325f851503e46fbca7a44ff00d03bbed042417d5863588f36a1b"),
    "0019": ("0019_team_hardening.py", "a13722c53b994798530a28f89708a84902d533dd20e8c243849b1942f83ec3ad"),
    "0020": ("0020_agent_sdk_store.py", "75ee0d03fec24491abe0604a76f336081f7d0de459c5f27640ec831fc5b0f63f"),
    "0021": ("0021_usage_once.py", "f96b52bc0f3b69b601a464e2a575fddabfb9ca9ccb2dfaed3f1bcacd199c7f9a"),
    "0022": ("0022_agent_sdk_pending.py", "5eb89bed436181837629244203ea8eacd4d89367d398b5cdf5be018b3450de19"),
    "0023": ("0023_import_locks.py", "9fd6e21b389d6d56cccc12f43c974c0d6b5b305a42b8eefd03e01ca38c9882a7"),
    "0024": ("0024_agent_sdk_grants.py", "c9acbbc36b0d7b65a6e6e0cde7de477737a76fd23095ae28d96002528f3a26bd"),
    "0025": ("0025_agent_sdk_entry_keys.py", "10484fa6b954e796f4656a9a81ce937db361a7f179a66534b1ffcd2a7c455cdc"),
}

_REVISION = re.compile(r"""^revision(?:\s*:\s*str)?\s*=\s*['"]([^'"]+)['"]""", re.MULTILINE)


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def check_released(directory: Path, released: dict[str, tuple[str, str]]) -> list[str]:
    """What differs between `directory` and the pinned table: one line per missing or edited revision."""
    problems = []
    for revision, (name, expected) in sorted(released.items()):
        path = directory / name
        if not path.is_file():
            problems.append(f"{revision}: {name} is missing (a released revision is never removed or renamed)")
            continue
        found = _REVISION.search(path.read_text(encoding="utf-8"))
        if found is None or found.group(1) != revision:
            problems.append(f"{revision}: {name} no longer declares revision = {revision!r}")
        actual = sha256(path)
        if actual != expected:
            problems.append(
                f"{revision}: {name} was edited (sha256 {actual}, released as {expected}); "
                "put the change in a new revision instead"
            )
    return problems


@pytest.mark.parametrize("revision", sorted(RELEASED))
def test_every_released_revision_is_unchanged(revision: str) -> None:
    assert check_released(VERSIONS, {revision: RELEASED[revision]}) == []


def test_the_table_is_a_gap_free_run_from_the_first_revision() -> None:
    ids = sorted(RELEASED)
    assert ids == [f"{n:04d}" for n in range(1, len(ids) + 1)], ids


def test_an_edited_or_missing_revision_is_reported(tmp_path: Path) -> None:
    """The check itself: a copy of the released files passes, one changed byte or a removed file does not."""
    for name, _ in RELEASED.values():
        (tmp_path / name).write_bytes((VERSIONS / name).read_bytes())
    assert check_released(tmp_path, RELEASED) == []
    edited = tmp_path / RELEASED["0002"][0]
    edited.write_bytes(edited.read_bytes().replace(b"search", b"Search", 1))
    (tmp_path / RELEASED["0004"][0]).unlink()
    problems = check_released(tmp_path, RELEASED)
    assert [p.split(":")[0] for p in problems] == ["0002", "0004"], problems
    assert "was edited" in problems[0] and "is missing" in problems[1]

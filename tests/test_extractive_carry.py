"""Compacting twice keeps what the first summary kept (issue 16, item 8).

The second summary's span holds the first summary; its user messages, tools,
files, commands, failures and open todo items are facts of that span, so the
extractive summarizer carries them forward, within its budgets.
"""

from __future__ import annotations

from typing import Any

from sessionstore import SessionStore
from sessionstore.compaction.engine import compact
from sessionstore.compaction.summarizers.carried import carried_facts
from sessionstore.compaction.summarizers.extractive import USER_MESSAGE_BUDGET, summary_section
from sessionstore.storage.read.history import boundaries

FILLER = "output line of the build that goes on for a while\n" * 80


def _phase_one(s: Any) -> None:
    s.append({"role": "user", "content": "Port the lexer to the new token table.\nKeep the old API."})
    s.append(
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "a1", "name": "Read", "input": {"file_path": "src/lexer.py"}}],
        }
    )
    s.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "a1", "content": FILLER}]})
    s.append(
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "a2", "name": "Bash", "input": {"command": "pytest tests/test_lexer.py"}}
            ],
        }
    )
    s.append(
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "a2",
                    "is_error": True,
                    "content": "Exit code 1\nE   KeyError: 'ARROW' in token table\n" + FILLER,
                }
            ],
        }
    )
    s.append(
        {
            "role": "assistant",
            "content": [
                {
                    "type": "tool_use",
                    "id": "a3",
                    "name": "TodoWrite",
                    "input": {
                        "todos": [
                            {"content": "add ARROW to the table", "status": "in_progress"},
                            {"content": "rerun the lexer tests", "status": "pending"},
                            {"content": "read the lexer", "status": "completed"},
                        ]
                    },
                }
            ],
        }
    )
    s.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "a3", "content": "ok"}]})
    s.append({"role": "assistant", "content": "The table lacks ARROW; adding it next."})


def _phase_two(s: Any) -> None:
    s.append({"role": "user", "content": "Also update the docs in docs/lexer.md."})
    s.append(
        {
            "role": "assistant",
            "content": [
                {
                    "type": "tool_use",
                    "id": "b1",
                    "name": "Edit",
                    "input": {"file_path": "docs/lexer.md", "old_string": "old", "new_string": "new"},
                }
            ],
        }
    )
    s.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "b1", "content": FILLER}]})
    s.append({"role": "assistant", "content": "Docs updated."})


def test_second_summary_keeps_the_first_summarys_facts(store: SessionStore) -> None:
    s = store.create_session()
    _phase_one(s)
    compact(s)
    first = boundaries(s)[0].summary or ""
    assert "src/lexer.py" in first and "KeyError" in first
    _phase_two(s)
    compact(s)
    second = boundaries(s)[1].summary or ""

    users = summary_section(second, 6)
    assert "Port the lexer to the new token table.\nKeep the old API." in users
    assert "Also update the docs in docs/lexer.md." in users
    assert users.index("Also update the docs") < users.index("Port the lexer"), "newest first"
    concepts = summary_section(second, 2)
    assert "None recorded" not in concepts
    assert "Read ×1" in concepts and "Bash ×1" in concepts and "Edit ×1" in concepts and ".py ×1" in concepts
    files = summary_section(second, 3)
    assert "src/lexer.py: read" in files and "docs/lexer.md: edited" in files
    assert "`pytest tests/test_lexer.py` → failed (exit 1)" in files
    assert "KeyError: 'ARROW' in token table" in summary_section(second, 4)
    pending = summary_section(second, 7)
    assert "[in_progress] add ARROW to the table" in pending and "[pending] rerun the lexer tests" in pending
    assert "Continue with: add ARROW to the table" in summary_section(second, 9)


def test_a_third_compaction_still_has_everything(store: SessionStore) -> None:
    s = store.create_session()
    _phase_one(s)
    compact(s)
    _phase_two(s)
    compact(s)
    s.append({"role": "user", "content": "Ship it."})
    s.append(
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "c1", "name": "Bash", "input": {"command": "make release"}}],
        }
    )
    s.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c1", "content": FILLER}]})
    s.append({"role": "assistant", "content": "Released."})
    compact(s)
    third = boundaries(s)[2].summary or ""
    for fact in (
        "Port the lexer",
        "Also update the docs",
        "Ship it.",
        "src/lexer.py",
        "docs/lexer.md",
        "`make release` → ok",
        "KeyError: 'ARROW'",
        "Bash ×2",
    ):
        assert fact in third, fact


def test_a_newer_todo_list_replaces_the_carried_one(store: SessionStore) -> None:
    s = store.create_session()
    _phase_one(s)
    compact(s)
    s.append({"role": "user", "content": "done with ARROW?"})
    s.append(
        {
            "role": "assistant",
            "content": [
                {
                    "type": "tool_use",
                    "id": "d1",
                    "name": "TodoWrite",
                    "input": {
                        "todos": [
                            {"content": "add ARROW to the table", "status": "completed"},
                            {"content": "rerun the lexer tests", "status": "in_progress"},
                        ]
                    },
                }
            ],
        }
    )
    s.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "d1", "content": FILLER}]})
    s.append({"role": "assistant", "content": "Running them."})
    compact(s)
    pending = summary_section(boundaries(s)[1].summary or "", 7)
    assert "add ARROW" not in pending and "[in_progress] rerun the lexer tests" in pending


def test_carried_user_messages_stay_within_the_budget() -> None:
    """Earlier summaries' messages join the budget: older ones beyond it are cut to their first line."""
    big = ["first line %d\n" % i + "word " * 12_000 for i in range(3)]
    earlier = "6. All User Messages:\n(newest first)\n" + "\n".join(f"- {m}" for m in reversed(big))
    facts = carried_facts([earlier])
    assert [m.splitlines()[0] for m in facts.user_messages] == ["first line 0", "first line 1", "first line 2"]
    from sessionstore.compaction.summarizers.extractive import budget_user_messages

    kept = budget_user_messages(facts.user_messages + ["newest"])
    assert sum(len(m) for m in kept) // 4 <= USER_MESSAGE_BUDGET + 300
    assert kept[0] == "newest" and kept[-1] == "first line 0 […]"

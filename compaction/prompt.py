"""The compaction prompt: nine summary sections, `<analysis>` then `<summary>`."""

from __future__ import annotations

import re

#: The nine parts every summary has, in order (DESIGN.md, "Full compaction").
SUMMARY_SECTIONS: tuple[str, ...] = (
    "Primary Request and Intent",
    "Key Technical Concepts",
    "Files and Code Sections",
    "Errors and Fixes",
    "Problem Solving",
    "All User Messages",
    "Pending Tasks",
    "Current Work",
    "Optional Next Step",
)

NO_TOOLS_PREAMBLE = (
    "You are summarizing a conversation between a user and a coding agent so the "
    "agent can continue it with less context. Respond with text only: do not call "
    "any tool, the tools are not available for this request."
)


def compact_prompt(custom_instructions: str | None = None, *, truncated: bool = False) -> str:
    """The user message that asks for the summary, appended after the conversation."""
    sections = "\n".join(f"{i}. {name}" for i, name in enumerate(SUMMARY_SECTIONS, 1))
    parts = [
        NO_TOOLS_PREAMBLE,
        "",
        "First think inside <analysis> tags: walk through the conversation in order and "
        "note every explicit user request, the approach taken, file names, code, errors "
        "and how they were fixed. Then write the summary inside <summary> tags with these "
        "sections, each as a numbered heading:",
        sections,
        "",
        "Quote every user message (not tool results) under section 6. Keep code excerpts "
        "that matter for the current work. The next step must follow directly from the "
        "most recent user request; do not start unrelated work.",
    ]
    if truncated:
        parts += [
            "",
            "Note: the oldest part of the conversation was dropped to fit this request; summarize what remains.",
        ]
    if custom_instructions and custom_instructions.strip():
        parts += ["", "Additional instructions:", custom_instructions.strip()]
    return "\n".join(parts)


_ANALYSIS = re.compile(r"<analysis>.*?(</analysis>|$)", re.DOTALL)
_SUMMARY = re.compile(r"<summary>(.*?)(</summary>|$)", re.DOTALL)


def strip_analysis(raw: str) -> str:
    """The text that enters the view: the `<summary>` body, never the `<analysis>`."""
    without = _ANALYSIS.sub("", raw)
    match = _SUMMARY.search(without)
    body = match.group(1) if match else without
    return body.strip()


def summary_message_text(summary: str, *, truncated: bool = False) -> str:
    """Wrap a summary as the user message that opens the compacted view."""
    lead = (
        "This session is being continued from a previous conversation that ran out of "
        "context. The summary below covers the earlier portion of the conversation."
    )
    if truncated:
        lead += " (The oldest part was too long to summarize and was left out.)"
    return f"{lead}\n\n{summary}"

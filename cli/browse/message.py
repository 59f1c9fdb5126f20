"""Message detail: full text, tool calls with their inputs, tool results, thinking (collapsed), usage.

The content shown is the one the view showed (a cleared or spilled tool
result shows its replacement); `o` opens a spilled result's original from
the blob store.
"""

from __future__ import annotations

import json
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Collapsible, Static, TextArea

from sessionstore.storage.write.apicompaction import server_notes
from sessionstore.sanitize import one_line, visible
from sessionstore.storage.read.paging import message_at
from sessionstore.storage.write.replacements import Replacement, get_replacement
from sessionstore.storage.write.session import Session
from sessionstore.storage.write.spill import spill_original

from .keybar import KeyBar
from .requests import Fork

#: Characters of one block drawn on screen; the rest is named, not drawn.
BLOCK_CHARS = 100_000
#: Short names of the usage fields, so the usage line fits 80 columns.
USAGE_NAMES = {
    "input_tokens": "in",
    "output_tokens": "out",
    "cache_creation_input_tokens": "cache write",
    "cache_read_input_tokens": "cache read",
    "service_tier": "tier",
}
#: Bytes of a spilled original loaded into the viewer.
ORIGINAL_BYTES = 2_000_000


def clipped(text: str, limit: int = BLOCK_CHARS) -> str:
    """`text`, or its first `limit` characters and a line saying how much is left out."""
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n… {len(text) - limit:,} more characters (export the session to read them all)"


def result_text(content: Any) -> str:
    """A tool_result's content as text (nested text blocks joined, others named)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(b.get("text", f"[{b.get('type')}]") if isinstance(b, dict) else str(b) for b in content)
    return "" if content is None else json.dumps(content, ensure_ascii=False)


class MessageScreen(Screen[None]):
    """One message in full."""

    BINDINGS = [
        Binding("q,escape", "app.back", "Back", id="back"),
        Binding("o", "original", "Open original", id="original"),
        Binding("f", "fork", "Fork", id="fork"),
    ]

    def __init__(self, session: Session, seq: int, *, version: int | None = None):
        super().__init__()
        self.session = session
        self.shown = message_at(session, seq, version=version)
        self.spills = self._spills()

    def _spills(self) -> list[Replacement]:
        """Spill decisions (with an original kept) for this message's tool results."""
        found = []
        for block in self.shown.content if isinstance(self.shown.content, list) else []:
            if isinstance(block, dict) and block.get("type") == "tool_result":
                decision = get_replacement(self.session.db, self.session.id, str(block.get("tool_use_id")))
                if decision is not None and decision.blob_sha256:
                    found.append(decision)
        return found

    def compose(self) -> ComposeResult:
        yield Static(self._info(), id="message-info")
        with VerticalScroll(id="message-body"):
            yield from self._blocks()
        yield KeyBar()

    def on_mount(self) -> None:
        self.query_one("#message-body").focus()

    def _info(self) -> Text:
        m = self.shown.message
        kind = m.subtype or ("summary" if m.is_compact_summary else m.type)
        text = Text()
        text.append(one_line(f" {m.role} · {kind}"), "bold")
        text.append(one_line(f" · seq {m.seq} · {m.tokens:,} tokens · {m.timestamp or 'no time'}"))
        if self.shown.replaced:
            text.append(" · the view shows a replacement", "italic")
        text.append(f"\n uuid {one_line(m.uuid)}")
        if m.usage:
            text.append(
                "\n usage: "
                + one_line(
                    " · ".join(
                        f"{USAGE_NAMES.get(k, k)} {v:,}" if isinstance(v, int) else f"{USAGE_NAMES.get(k, k)} {v}"
                        for k, v in m.usage.items()
                        if not isinstance(v, (dict, list)) and v is not None
                    )
                )
            )
        for label, line in server_notes(m.content, m.usage, m.metadata):
            text.append(f"\n {label}: {one_line(line)}")
        return text

    def _blocks(self) -> list[Widget]:
        content = self.shown.content
        if isinstance(content, str):
            return [Static(Text(visible(clipped(content))), classes="block text")]
        spilled = {s.tool_use_id: s for s in self.spills}
        out: list[Widget] = []
        for block in content:
            out.extend(self._block(block if isinstance(block, dict) else {"type": "?"}, spilled))
        return out or [Static(Text("(no content)"), classes="block")]

    def _block(self, block: dict[str, Any], spilled: dict[str, Replacement]) -> list[Widget]:
        kind = block.get("type")
        if kind == "text":
            return [Static(Text(visible(clipped(str(block.get("text", ""))))), classes="block text")]
        if kind in ("thinking", "redacted_thinking"):
            body = str(block.get("thinking") or "(redacted)")
            shown = Static(Text(visible(clipped(body))), classes="block")
            return [Collapsible(shown, title="thinking", collapsed=True)]
        if kind == "tool_use":
            head = Text(one_line(f"⚙ tool_use {block.get('name')} · {block.get('id')}"), "bold")
            body = json.dumps(block.get("input"), ensure_ascii=False, indent=2)
            return [Static(head, classes="block-head"), Static(Text(visible(clipped(body))), classes="block code")]
        if kind == "tool_result":
            return self._result(block, spilled)
        if kind in ("image", "document"):
            return [Static(Text(f"[{kind}]"), classes="block-head")]
        if kind == "compaction":
            return self._compaction(block)
        return [Static(Text(visible(f"[{kind}] " + clipped(json.dumps(block, ensure_ascii=False)))), classes="block")]

    def _compaction(self, block: dict[str, Any]) -> list[Widget]:
        """The API's compaction block: its summary as text, never its encrypted copy and signature (the API's own)."""
        from sessionstore.storage.core.blocktypes import compaction_summary

        summary = compaction_summary(block)
        if summary is None:
            return [Static(Text("✂ compaction · failed: the server returned no summary", "bold"), classes="block-head")]
        head = Static(Text("✂ compaction · the API's summary of the view it replaced", "bold"), classes="block-head")
        return [head, Static(Text(visible(clipped(summary))), classes="block text")]

    def _result(self, block: dict[str, Any], spilled: dict[str, Replacement]) -> list[Widget]:
        tool_use_id = str(block.get("tool_use_id"))
        head = Text(one_line(f"⤶ tool_result · {tool_use_id}" + (" · error" if block.get("is_error") else "")), "bold")
        widgets: list[Widget] = [Static(head, classes="block-head")]
        decision = spilled.get(tool_use_id)
        if decision is not None:
            others = " (n/p there for the other spilled results)" if len(spilled) > 1 else ""
            note = (
                f"spilled: the view shows this preview; o opens the original{others} "
                f"({decision.original_size or 0:,} bytes, sessionstore spill cat {self.session.id[:8]} "
                f"{tool_use_id})"
            )
            widgets.append(Static(Text(one_line(note), "italic"), classes="block-note"))
        widgets.append(Static(Text(visible(clipped(result_text(block.get("content"))))), classes="block code"))
        return widgets

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "original":
            return bool(self.spills)
        return True

    def action_fork(self) -> None:
        """A new session holding the view as it stood right after this message."""
        self.post_message(Fork(self.session.id, at=self.shown.message.seq))

    def action_original(self) -> None:
        if self.spills:
            self.app.push_screen(OriginalScreen(self.session, [s.tool_use_id for s in self.spills]))


class OriginalScreen(Screen[None]):
    """The originals of a message's spilled tool results, read-only, one at a time (n/p move between them)."""

    BINDINGS = [
        Binding("q,escape", "app.back", "Back", id="back"),
        Binding("n", "move(1)", "Next original", id="next"),
        Binding("p", "move(-1)", "Previous original", id="previous"),
    ]

    def __init__(self, session: Session, tool_use_ids: list[str], index: int = 0):
        super().__init__()
        self.session = session
        self.ids = tool_use_ids
        self.index = index
        self.tool_use_id = tool_use_ids[index]
        self.data = spill_original(session, self.tool_use_id)

    def compose(self) -> ComposeResult:
        yield Static(self._info(), id="original-info")
        yield TextArea(self._text(), read_only=True, show_line_numbers=True, id="original-text")
        yield KeyBar()

    def _info(self) -> Text:
        size = len(self.data)
        note = "" if size <= ORIGINAL_BYTES else f" · first {ORIGINAL_BYTES:,} bytes shown"
        which = f" ({self.index + 1} of {len(self.ids)}; n/p for the others)" if len(self.ids) > 1 else ""
        return Text(
            one_line(f" original of {self.tool_use_id}{which} · {size:,} bytes{note}"),
            "bold",
            no_wrap=True,
            overflow="ellipsis",
        )

    def on_mount(self) -> None:
        self.query_one(TextArea).focus()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "move":
            return len(self.ids) > 1
        return True

    def action_move(self, step: int) -> None:
        """Show the next (or previous) spilled original of the same message."""
        self.index = (self.index + step) % len(self.ids)
        self.tool_use_id = self.ids[self.index]
        self.data = spill_original(self.session, self.tool_use_id)
        self.query_one("#original-info", Static).update(self._info())
        self.query_one(TextArea).load_text(self._text())

    def _text(self) -> str:
        """The original's first ORIGINAL_BYTES as text, controls shown (see `sessionstore.sanitize`)."""
        return visible(self.data[:ORIGINAL_BYTES].decode("utf-8", "replace"))

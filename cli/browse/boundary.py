"""The boundary screen: what the model saw before boundary K, the summary that replaced it, what was kept.

Three panes, one shown at a time; the second and third are read when first
shown. The view before K is a past view read by pages (messages K
summarized are marked ✂; for a background API compaction, the request it
sent, as `history -b K` shows it); the summary is the compaction's own record
(an API boundary's: its compaction block's content); the preserved segment is
the run K kept verbatim, read from the view K made.
`n`/`p` move to the next/previous boundary.
"""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import ContentSwitcher, Static

from sessionstore.sanitize import one_line, visible
from sessionstore.storage.read import history
from sessionstore.storage.read import paging
from sessionstore.storage.write.session import Session

from ..tables import when
from .keybar import KeyBar
from .message import MessageScreen
from .requests import Fork
from .sources import PastView, Segment
from .viewlist import ViewList


class BoundaryScreen(Screen[None]):
    """Boundary K of a session, in three panes."""

    BINDINGS = [
        Binding("q,escape", "app.back", "Back", id="back"),
        Binding("n", "move(1)", "Next ✂", id="next"),
        Binding("p", "move(-1)", "Prev ✂", id="prev"),
        Binding("1", "tab('before')", "Before", id="tab-before"),
        Binding("2", "tab('summary')", "Summary", id="tab-summary"),
        Binding("3", "tab('kept')", "Kept", id="tab-kept"),
        Binding("f", "fork", "Fork", id="fork"),
    ]

    def __init__(self, session: Session, index: int, *, total: int | None = None, seq: int | None = None):
        super().__init__()
        self.session = session
        self.boundary = history.boundary(session, index)
        self.floor = history.boundary_floor(session, index)[1]
        self.total = total if total is not None else paging.boundary_total(session.db, session.id)
        self.index = index
        self.seq = seq
        self.position = (
            paging.past_position(session, self.boundary.replaced_version, seq, self.floor, self.boundary.sent_through)
            if seq is not None
            else None
        )
        self.ready = False
        self.active = "before"
        self.kept_count: int | None = None

    def compose(self) -> ComposeResult:
        b = self.boundary
        yield Static(self._info(), id="boundary-info")
        self.before_list = ViewList(
            PastView(self.session, b.replaced_version, self.floor, b.sent_through),
            marked=paging.summarized_seqs(self.session.db, b.id),
            id="before-list",
            empty="(the view was empty)",
        )
        yield Static(self._tabs("before"), id="boundary-tabs")
        with ContentSwitcher(initial="before-list", id="boundary-panes"):
            yield self.before_list
        yield KeyBar()

    def _tabs(self, active: str) -> Text:
        """The tab bar: three names, the active one highlighted (panes other than the first load when shown)."""
        kept = f" ({self.kept_count:,})" if self.kept_count is not None else ""
        names = (
            ("before", f"1 View before ✂{self.index} ({self.before_list.total:,})"),
            ("summary", "2 Summary"),
            ("kept", f"3 Preserved{kept}"),
        )
        text = Text(no_wrap=True, overflow="ellipsis")
        for name, label in names:
            text.append(f" {label} ", "reverse bold" if name == active else "dim")
            text.append(" ")
        return text

    def _kept(self) -> Segment:
        """The preserved run head..tail in the view the compaction made (version replaced + 1)."""
        b = self.boundary
        made = b.replaced_version + 1
        keys = None
        if b.head_uuid and b.tail_uuid:
            keys = paging.segment_keys(self.session, made, b.head_uuid, b.tail_uuid)
        return Segment(self.session, made, keys)

    def _info(self) -> Text:
        b = self.boundary
        text = Text(no_wrap=True, overflow="ellipsis")
        text.append(f" boundary {b.index} of {self.total}", "bold")
        text.append(
            one_line(
                f" · {b.kind} · {b.trigger} · {b.pre_tokens:,} → {b.post_tokens:,} tokens · "
                f"{b.messages_summarized:,} messages summarized · {when(b.timestamp, b.created_at)}"
            )
        )
        if b.summarizer:
            text.append(one_line(f" · {b.summarizer}"))
        return text

    def on_mount(self) -> None:
        listing = self.query_one("#before-list", ViewList)
        listing.focus()
        if self.position is not None:
            listing.move_to(self.position, center=True)
        self.ready = True

    def on_view_list_selected(self, event: ViewList.Selected) -> None:
        self.app.push_screen(MessageScreen(self.session, event.row.seq, version=event.view_list.source.version))

    def action_fork(self) -> None:
        """A new session holding exactly the view before this boundary (undo the compaction, apart)."""
        self.post_message(Fork(self.session.id, before_boundary=self.index))

    def action_move(self, step: int) -> None:
        target = self.index + step
        if 1 <= target <= self.total:
            self.app.switch_screen(BoundaryScreen(self.session, target, total=self.total))
        else:
            self.notify("no " + ("later" if step > 0 else "earlier") + " boundary", severity="information")

    def action_tab(self, name: str) -> None:
        """Show one pane, mounting it the first time."""
        panes = self.query_one(ContentSwitcher)
        pane_id = {"before": "before-list", "summary": "summary-scroll", "kept": "kept-list"}[name]
        if not panes.query(f"#{pane_id}"):
            panes.mount(self._pane(name))
        panes.current = pane_id
        self.active = name
        self.query_one("#boundary-tabs", Static).update(self._tabs(name))
        self.query_one(f"#{pane_id}").focus()

    def _pane(self, name: str) -> VerticalScroll | ViewList:
        if name == "summary":
            return VerticalScroll(
                Static(Text(visible(self.boundary.summary or "(no summary recorded)")), id="summary-text"),
                id="summary-scroll",
            )
        kept = ViewList(
            self._kept(),
            id="kept-list",
            empty="(nothing kept verbatim: every message before the boundary was summarized)",
        )
        self.kept_count = kept.total
        return kept

"""`sessionstore browse`: the Textual app that holds the store and moves between screens.

Screens: sessions (list, filter, search) -> session (timeline, boundaries,
active view) -> boundary (view before, summary, preserved segment) and
message detail. Every screen reads pages from the store on the app's thread;
exports and searches run in worker threads on their own connections.

The app imports the screens and opens them; a screen never imports the app: what it
asks of it (open a session, search, fork, export, copy) it posts as a message from
`requests`, which bubbles up to the handlers here.
"""

from __future__ import annotations

from pathlib import Path
from textual import work
from textual.app import App
from textual.binding import Binding

from sessionstore import SessionStore
from sessionstore.sanitize import one_line
from sessionstore.storage.engine.config import default_db_url

from .boundary import BoundaryScreen
from .exporting import export_to_file
from .exportscreen import ExportScreen
from .message import MessageScreen
from .requests import CopyResume, ExportSession, Fork, OpenHit, OpenSession, Search
from .search import run_search
from .session import SessionScreen
from .sessions import SessionsScreen


class BrowseApp(App[None]):
    """A terminal browser of sessions, boundaries and what each compaction replaced."""

    CSS_PATH = "browse.tcss"
    TITLE = "sessionstore browse"
    ENABLE_COMMAND_PALETTE = False

    BINDINGS = [
        Binding("ctrl+c", "quit", "Quit", priority=True, show=False),
        Binding("ctrl+t", "toggle_theme", "Light/dark", show=False, id="theme"),
        Binding("slash", "search_everywhere", "Search", key_display="/", id="search"),
    ]

    def __init__(self, store: SessionStore, *, session_id: str | None = None, light: bool = False):
        super().__init__()
        self.store = store
        self.start_session = session_id
        self.light = light

    def on_mount(self) -> None:
        self.theme = "textual-light" if self.light else "textual-dark"
        if self.start_session:
            self.open_session(self.start_session)
        else:
            self.push_screen(SessionsScreen(self.store))

    # ---------------------------------------------------------- screens' requests

    def on_open_session(self, request: OpenSession) -> None:
        self.open_session(request.session_id)

    def on_open_hit(self, request: OpenHit) -> None:
        self.open_hit(request.session_id, request.seq, request.boundary)

    def on_search(self, request: Search) -> None:
        self.search(request.query)

    def on_fork(self, request: Fork) -> None:
        self.fork(request.session_id, at=request.at, before_boundary=request.before_boundary)

    def on_export_session(self, request: ExportSession) -> None:
        self.ask_export(request.session_id)

    def on_copy_resume(self, request: CopyResume) -> None:
        self.copy_resume(request.session_id)

    # ---------------------------------------------------------------- navigation

    def open_session(self, session_id: str, *, seq: int | None = None) -> None:
        """Push the session screen, its message list on `seq` when that message is in the active view."""
        self.push_screen(SessionScreen(self.store.get(session_id), seq=seq))

    def open_hit(self, session_id: str, seq: int, boundary: int | None = None) -> None:
        """Open a search hit where it lives: in the active view, or in the view before the boundary that replaced it."""
        from sessionstore.storage.read import paging

        session = self.store.get(session_id)
        if boundary is None and paging.active_position(session, seq) is not None:
            self.open_session(session_id, seq=seq)
            return
        index = boundary or paging.replacing_boundary(session, seq)
        self.open_session(session_id)
        if index is not None:
            screen = BoundaryScreen(session, index, seq=seq)
            self.push_screen(screen)
            if screen.position is not None:
                return
        self.push_screen(MessageScreen(session, seq))

    def action_search_everywhere(self) -> None:
        """Back to the sessions screen with the search box focused."""
        while len(self.screen_stack) > 2 and not isinstance(self.screen, SessionsScreen):
            self.pop_screen()
        if not isinstance(self.screen, SessionsScreen):
            self.switch_screen(SessionsScreen(self.store))
        self.call_after_refresh(
            lambda: self.screen.action_search() if isinstance(self.screen, SessionsScreen) else None
        )

    def action_toggle_theme(self) -> None:
        self.theme = "textual-dark" if self.theme == "textual-light" else "textual-light"

    # ------------------------------------------------------------------ verbs

    def resume_command(self, session_id: str) -> str:
        """The command that resumes the session where it came from: Claude Code, Codex, or the agent REPL."""
        from sessionstore.interchange.install import resume_command

        db = "" if self.store.url == default_db_url() else f" --db {self.store.display_url}"
        return resume_command(self.store.get(session_id), db_option=db)

    def fork(self, session_id: str, *, at: int | None = None, before_boundary: int | None = None) -> None:
        """Fork the session (right after message seq `at`, or before boundary K) and open the fork.

        The browser reads through a read-only store; the fork, its one write, goes through a store of its own.
        """
        from sessionstore import SessionStoreError

        try:
            with SessionStore.open(self.store.url) as writer:
                made = writer.get(session_id).fork(at, before_boundary=before_boundary)
        except SessionStoreError as exc:  # shown to the person, never raised into the UI
            self.notify(one_line(str(exc)), title="cannot fork here", severity="error")
            return
        self.notify(f"{made.id} (sessionstore chat {made.id[:8]})", title="forked")
        self.open_session(made.id)

    def copy_resume(self, session_id: str) -> None:
        """Copy the resume command to the terminal's clipboard and show it."""
        command = self.resume_command(session_id)
        self.copy_to_clipboard(command)
        self.notify(one_line(command), title="copied", markup=False)

    def ask_export(self, session_id: str) -> None:
        """Pick a format and a file, then export the whole session in the background."""

        def chosen(result: tuple[str, str] | None) -> None:
            if result is not None:
                self.export(session_id, result[0], Path(result[1]))

        self.push_screen(ExportScreen(session_id), chosen)

    @work(thread=True, group="export")
    def export(self, session_id: str, fmt: str, path: Path) -> None:
        """Write the export on a connection of its own, then say where it went."""
        try:
            count = export_to_file(self.store.url, session_id, fmt, path)
        except Exception as exc:  # shown to the person, never raised into the UI
            self.call_from_thread(self.notify, one_line(f"export failed: {exc}"), severity="error", markup=False)
            return
        self.call_from_thread(
            self.notify, one_line(f"wrote {count:,} messages to {path}"), title="exported", markup=False
        )

    @work(thread=True, exclusive=True, group="search")
    def search(self, query: str) -> None:
        """Run the full-text search off the UI thread and hand the hits to the sessions screen."""
        outcome = run_search(self.store.url, query)
        screen = next((s for s in self.screen_stack if isinstance(s, SessionsScreen)), None)
        if screen is not None:
            self.call_from_thread(screen.show_hits, query, outcome)

    def action_back(self) -> None:  # type: ignore[override]  # Textual runs sync actions too; nothing to await
        """q: back to the screen below; from a session opened directly, to the sessions list; else quit."""
        if len(self.screen_stack) > 2:
            self.pop_screen()
        elif not isinstance(self.screen, SessionsScreen):
            self.switch_screen(SessionsScreen(self.store))
        else:
            self.exit()


def make_app(url: str | None = None, *, session_id: str | None = None, light: bool = False) -> BrowseApp:
    """The app on the store at `url` (the default store when None), opened on a session when given."""
    store = SessionStore.open(url, read_only=True)
    if session_id:
        session_id = store.get(session_id).id
    return BrowseApp(store, session_id=session_id, light=light)

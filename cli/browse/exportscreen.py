"""The export picker: a format, then the file to write (a default path is offered)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Label, OptionList

from sessionstore.sanitize import one_line

from .exporting import FORMATS, default_path


class ExportScreen(ModalScreen[tuple[str, str] | None]):
    """Choose a format (Enter), edit the path (Enter exports); Escape cancels."""

    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, session_id: str):
        super().__init__()
        self.session_id = session_id
        self.fmt = next(iter(FORMATS))

    def compose(self) -> ComposeResult:
        with Vertical(id="export-box"):
            yield Label(
                one_line(f"Export session {self.session_id[:8]}: pick a format, then the file"),
                id="export-title",
                markup=False,
            )
            yield OptionList(*FORMATS, id="export-formats")
            yield Input(str(default_path(self.session_id, self.fmt)), id="export-path")

    def on_mount(self) -> None:
        self.query_one(OptionList).focus()

    def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        self._choose(str(event.option.prompt))

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self._choose(str(event.option.prompt))
        self.query_one(Input).focus()

    def _choose(self, fmt: str) -> None:
        """Switch format; the path follows unless the person already typed their own."""
        path = self.query_one(Input)
        if path.value == str(default_path(self.session_id, self.fmt)):
            path.value = str(default_path(self.session_id, fmt))
        self.fmt = fmt

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.value.strip():
            self.dismiss((self.fmt, event.value.strip()))

    def action_cancel(self) -> None:
        self.dismiss(None)

"""The footer: the keys of the focused screen and widget, in one line of text.

Textual's stock Footer builds a widget per key and rebuilds them on every
focus change, which costs more than the rest of a screen together; this bar
draws the same `key Description` pairs as text (greyed when unavailable).
"""

from __future__ import annotations

from rich.text import Text
from textual.screen import Screen
from textual.widget import Widget


class KeyBar(Widget):
    """Shown bindings of the screen's active chain, as `key Description` pairs."""

    COMPONENT_CLASSES = {"keybar--key", "keybar--description", "keybar--disabled"}

    DEFAULT_CSS = """
    KeyBar {
        dock: bottom;
        height: 1;
        background: $footer-background;
        color: $footer-foreground;
        & > .keybar--key { color: $footer-key-foreground; background: $footer-key-background; text-style: bold; }
        & > .keybar--description { color: $footer-description-foreground; }
        & > .keybar--disabled { color: $text-disabled; }
    }
    """

    def on_mount(self) -> None:
        self.screen.bindings_updated_signal.subscribe(self, self._changed)

    def _changed(self, screen: Screen[object]) -> None:
        if self.is_attached and screen is self.screen:
            self.refresh()

    def render(self) -> Text:
        key_style = self.get_component_rich_style("keybar--key")
        text_style = self.get_component_rich_style("keybar--description")
        off_style = self.get_component_rich_style("keybar--disabled")
        line = Text(no_wrap=True, overflow="ellipsis", end="")
        seen: set[str] = set()
        for _, binding, enabled, _ in self.screen.active_bindings.values():
            if not binding.show or binding.action in seen:
                continue
            seen.add(binding.action)
            line.append(f" {self.app.get_key_display(binding)} ", key_style if enabled else off_style)
            line.append(f"{binding.description} ", text_style if enabled else off_style)
        return line

"""What an exporter writes to: anything with `write`, so a file, stdout or a filter over either will do.

The exporters call nothing but `write` on their output, so they ask for no more than that; a
filter over a stream (the terminal sanitizer of `export -f markdown`) is then a valid output, as a file is.
"""

from __future__ import annotations

from typing import Protocol


class TextSink(Protocol):
    """Takes text."""

    def write(self, text: str, /) -> int: ...


class ByteSink(Protocol):
    """Takes bytes."""

    def write(self, data: bytes, /) -> int: ...

"""What a screen asks of the browser, as Textual messages: the screen posts one, the app does it.

A message bubbles from the screen up to the app, so no screen imports the app that opens it
(the app imports the screens; the screens only know these messages).
"""

from __future__ import annotations

from dataclasses import dataclass

from textual.message import Message


@dataclass
class OpenSession(Message):
    """Open a session's screen."""

    session_id: str


@dataclass
class OpenHit(Message):
    """Open a search hit where it lives: the active view, or the view before the boundary that replaced it."""

    session_id: str
    seq: int
    boundary: int | None = None


@dataclass
class Search(Message):
    """Search every message off the UI thread; the hits go to the sessions screen."""

    query: str


@dataclass
class Fork(Message):
    """Fork a session right after message seq `at`, or before boundary K, and open the fork."""

    session_id: str
    at: int | None = None
    before_boundary: int | None = None


@dataclass
class ExportSession(Message):
    """Ask for a format and a file, then export the whole session in the background."""

    session_id: str


@dataclass
class CopyResume(Message):
    """Copy the command that resumes the session where it came from."""

    session_id: str

"""`mcp`: serve the store to agents over the Model Context Protocol (stdio), read-only."""

from __future__ import annotations

import typer

from .common import DbOption, refuse_missing_sqlite


def register(app: typer.Typer) -> None:
    """Add this module's command to the app."""
    app.command("mcp")(mcp_cmd)


def mcp_cmd(db: DbOption = None) -> None:
    """Run a read-only MCP server on stdin/stdout: search, sessions, history, recall, spills.

    Examples:

      claude mcp add sessionstore -- sessionstore mcp --db sqlite:///$HOME/.local/share/sessionstore/sessions.db

      sessionstore mcp --db postgresql+psycopg://me@db/sessions
    """
    from sessionstore.agent.mcp_server import serve

    refuse_missing_sqlite(db)
    serve(db)

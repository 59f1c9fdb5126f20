"""The MCP server as a client process meets it: `python -m sessionstore mcp` over stdio, a child of this interpreter."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from mcp import StdioServerParameters

#: The checkout: the child imports the package from here and runs in it.
ROOT = Path(__file__).resolve().parent.parent.parent


def stdio_server(url: str) -> StdioServerParameters:
    """`sessionstore mcp --db URL` for an SDK client to start: the checkout importable, no environment but PATH."""
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "sessionstore", "mcp", "--db", url],
        env={"PYTHONPATH": str(ROOT), "PATH": os.environ.get("PATH", "")},
        cwd=str(ROOT),
    )

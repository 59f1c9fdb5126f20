"""`sessionstore mcp`: a tool error is a tool result the model reads, not a multi-line INFO log on stderr."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from mcp import ClientSession
from mcp.client.stdio import stdio_client

from sessionstore import SessionStore
from tests.support.mcpstdio import stdio_server


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
async def test_a_tool_error_prints_nothing_on_stderr(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'mcp.db'}"
    SessionStore.open(url).close()
    params = stdio_server(url)
    log = tmp_path / "stderr.txt"
    with open(log, "w") as err, anyio.fail_after(60):
        async with stdio_client(params, errlog=err) as (read, write):
            async with ClientSession(read, write) as client:
                await client.initialize()
                result = await client.call_tool("recall", {"session": "nope"})
    assert result.is_error and "no session 'nope'" in result.content[0].text  # type: ignore[union-attr]  # an error result is one text block
    assert log.read_text() == ""

"""`sessionstore browse` driven headless with Textual's pilot: run the app, perform steps, close its store.

The browse tests (the shared transcripts, the hostile corpus) drive the app the same way, so they
wait for its workers the same way too: a step sees the screen only once it has caught up.
"""

from __future__ import annotations

import asyncio
from typing import Awaitable, Callable

from textual.pilot import Pilot

from sessionstore.cli.browse.app import BrowseApp

Steps = Callable[[Pilot[None]], Awaitable[None]]


def drive(app: BrowseApp, steps: Steps, size: tuple[int, int] = (120, 40)) -> None:
    """Run the app headless at `size` (columns, lines), perform `steps`, then close it and its store."""

    async def main() -> None:
        async with app.run_test(size=size) as pilot:
            await settle(pilot)
            await steps(pilot)

    try:
        asyncio.run(main())
    finally:
        app.store.close()


async def settle(pilot: Pilot[None]) -> None:
    """Let workers finish and the screen catch up."""
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()

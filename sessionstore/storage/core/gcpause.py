"""Pause Python's cyclic garbage collector while a view is decoded, or a transcript imported, in bulk.

Decoding a view creates tens of thousands of dicts and lists in one go; each
700 new containers trigger a collection that walks objects which cannot be
cycles (freshly decoded JSON never is). Pausing collection for the duration
saves about a tenth of a resume, and about a twentieth of a 200 MB import
(whose full collections walk every line's graph facts kept so far).
Reference counting still frees everything as usual, and the collector is
re-enabled only if it was enabled before.
"""

from __future__ import annotations

import gc
from contextlib import contextmanager
from typing import Iterator


@contextmanager
def gc_paused() -> Iterator[None]:
    """Disable the cyclic collector inside the block; restore its previous state after."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()

"""The storage core: the transcript, the active view, rewrites, history, spills and the schema.

Rooms, bottom to top (docs/design.md, "The storage rooms"): `core`, `codecs`, `engine`,
`records`, `read`, `write` and `team`, `derived`, then `store` (the `SessionStore` front
door) and `upkeep`. A room imports only the rooms below it (pyproject.toml's import-linter
contracts, `make lint`). Everything else in sessionstore is built on this package; it imports
nothing from the layers above it.

Old module paths (the modules' names directly under `storage`) still import, as aliases of the moved
modules, until release 0.3.0 (`moved.py`).
"""

from .moved import install as _install_moved

_install_moved()

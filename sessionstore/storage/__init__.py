"""The storage core: the transcript, the active view, rewrites, history, spills and the schema.

Everything else in sessionstore is built on this package; it imports nothing from the layers above it.
"""

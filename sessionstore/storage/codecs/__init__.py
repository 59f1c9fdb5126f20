"""How texts and blobs are stored: zstd packing, fast JSON, line packing, search-text packing, token estimates, blobs.

Codecs know bytes, not sessions: they import only `core`.
"""

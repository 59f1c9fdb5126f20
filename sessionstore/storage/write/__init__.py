"""The write path: the session handle and every write that changes a transcript or its view.

Appends, rewrites (compactions), pins, spills, forks, the local continuation, session notes and the
API's own compaction. May read through `read`; nothing below imports it.
"""

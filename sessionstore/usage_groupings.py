"""The groupings a usage report can take, apart from `sessionstore.usage`.

The CLI names them in `usage --by`'s help, which must show without importing the store.
"""

#: The groupings a report can take.
GROUPINGS = ("day", "week", "month", "session", "project", "model", "host")

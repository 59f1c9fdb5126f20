"""`sessionstore browse`: a full-screen terminal browser (Textual) of sessions, boundaries and messages.

Imported only by the `browse` command, so the rest of the CLI never pays Textual's import time.
"""

"""A message between the API and its row: validation, the row mapping, the view state, the view as API messages.

Shared by the read and the write path, so it sits below both.
"""

"""The database and its schema: connections, the ORM models, migrations, configuration, id resolution.

Below every room that reads or writes sessions; imports only `core` and `codecs`.
"""

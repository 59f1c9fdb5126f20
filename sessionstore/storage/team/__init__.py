"""The shared PostgreSQL: who owns a session, shares, and the role grants."""

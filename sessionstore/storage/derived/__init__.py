"""Derived data any reader may bring up to date: the search index and the usage rollups."""

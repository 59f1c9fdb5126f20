"""Looking after a store: `doctor`, `vacuum` and the counts that describe a session."""

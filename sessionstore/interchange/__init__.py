"""Import and export: other tools' transcripts in, every format out. Sits above storage and compaction."""

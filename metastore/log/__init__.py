"""The command log: record format, topic, reader (replay) and writer (single-writer protocol)."""

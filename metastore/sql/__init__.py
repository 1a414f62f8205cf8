"""The ksqlDB language: types, statements, and a parser built as a custom sqlglot dialect."""

"""The `metastore` command line."""

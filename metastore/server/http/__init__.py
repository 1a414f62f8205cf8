"""The ksqlDB-compatible edge: error codes, the REST server and its request handling."""

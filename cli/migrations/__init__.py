"""``metastore migrations``: ksqlDB's schema migrations tool (``ksql-migrations``) for a node.

A project is a ``ksql-migrations.properties`` file and a ``migrations/`` directory of
``V<version>__<name>.sql`` files; the versions applied are recorded on the server in a stream and
a table. One module per concept: ``properties`` (the file format), ``config`` (the keys),
``files`` (names, order, checksums), ``statements`` (a file's statements and the kinds allowed),
``connection`` (the node), ``metadata`` (the stream, the table, the version records),
``validation``, ``apply``, ``destroy`` and ``commands`` (the typer commands).
"""

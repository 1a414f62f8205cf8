"""The catalog proper: its model (sources, columns, queries, types), the immutable image, the
resolved commands and their pure apply, and the worker thread that hands each new image to the
node's listeners. Nothing here validates a statement: that is :mod:`metastore.engine`."""

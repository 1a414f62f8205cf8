"""``metastore shell``: ksqlDB's CLI against a node, interactive or running statements and exiting.

:mod:`~cli.shell.main` is the command and its interactive loop; :mod:`~cli.shell.options` reads its
startup options; :mod:`~cli.shell.session` keeps what a session keeps (variables, properties,
query limits); :mod:`~cli.shell.connection` the node it talks to; :mod:`~cli.shell.console` where
its output goes (OUTPUT format, SPOOL, the terminal's width); :mod:`~cli.shell.commands` the CLI's
own commands; :mod:`~cli.shell.script` runs statements one by one; :mod:`~cli.shell.history` the
lines entered, across sessions.
"""

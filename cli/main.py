"""Entry point of the `metastore` command."""

from __future__ import annotations

import typer

from cli import commands, dev, log
from cli.check import check
from cli.migrations.commands import app as migrations_app
from cli.server import server
from cli.test import test

app = typer.Typer(help="metastore: a replicated command-log metastore on Kafka and Spark.",
                  no_args_is_help=True, pretty_exceptions_enable=False)
app.add_typer(dev.app, name="dev")
app.command()(check)
app.command()(server)
app.command()(test)
app.command("exec")(commands.exec_)
app.command("run-script")(commands.run_script)
app.command()(commands.shell)
app.command()(commands.describe)
app.command("list")(commands.list_)
app.command()(commands.query)
app.command()(commands.status)
app.add_typer(log.app, name="log")
app.add_typer(migrations_app, name="migrations")


def main() -> None:
    app()


if __name__ == "__main__":
    main()

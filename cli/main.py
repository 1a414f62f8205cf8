"""Entry point of the `metastore` command."""

from __future__ import annotations

import typer

from cli import dev
from cli.check import check

app = typer.Typer(help="metastore: a replicated command-log metastore on Kafka and Spark.",
                  no_args_is_help=True, pretty_exceptions_enable=False)
app.add_typer(dev.app, name="dev")
app.command()(check)


def main() -> None:
    app()


if __name__ == "__main__":
    main()

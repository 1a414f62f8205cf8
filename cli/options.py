"""The options several commands share: the node, its credentials, JSON output, request
properties."""

from __future__ import annotations

from typing import Annotated

import typer

Server = Annotated[str | None, typer.Option("--server", "-s", envvar="METASTORE_SERVER",
                                            help="Node URL (default http://127.0.0.1:8088).")]
Json = Annotated[bool, typer.Option("--json", help="Print JSON.")]
User = Annotated[str | None, typer.Option("--user", "-u", envvar="METASTORE_USER",
                                          help="USER:PASSWORD for HTTP basic auth.")]
Kafka = Annotated[list[str] | None, typer.Option(
    "--kafka", envvar="METASTORE_KAFKA",
    help="Extra Kafka client setting KEY=VALUE (TLS, SASL...); repeatable. METASTORE_KAFKA: "
         "the same, separated by spaces (keeps a password off the command line).")]
Property = Annotated[list[str] | None, typer.Option(
    "--property", "-p", help="A ksqlDB configuration override NAME=VALUE for the request "
    "(streamsProperties), e.g. ksql.persistence.default.format.value=JSON (repeatable).")]


def basic_auth(user: str | None) -> tuple[str, str] | None:
    """``--user USER:PASSWORD`` as httpx's basic auth."""
    if not user:
        return None
    name, _, password = user.partition(":")
    return name, password


def kafka_client(pairs: list[str] | None) -> dict[str, str]:
    """``--kafka KEY=VALUE`` options as Kafka client settings."""
    client: dict[str, str] = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise typer.BadParameter(f"expected KEY=VALUE, got {pair!r}", param_hint="--kafka")
        client[key.strip()] = value.strip()
    return client

"""The node a shell talks to, switched by SERVER and checked as ksqlDB's CLI checks a server:
its ``/info`` answers, else a warning naming it (the session goes on; each request that cannot
reach it says so)."""

from __future__ import annotations

import textwrap
from typing import Any
from urllib.parse import quote

import httpx

from cli.client import ClientError, KsqlClient, StatementFailedError

CONSOLE_WIDTH = 80
UNKNOWN = "<unknown>"


class Connection:
    def __init__(self, url: str, auth: tuple[str, str] | None) -> None:
        self._auth = auth
        self.client = KsqlClient(url, auth=auth)

    @property
    def url(self) -> str:
        return self.client.url

    def switch(self, url: str) -> None:
        """Talk to ``url`` from now on; raises ClientError, the current node kept, when it is
        not a URL."""
        try:
            switched = KsqlClient(url.rstrip("/"), auth=self._auth)
        except (httpx.InvalidURL, ValueError) as error:
            raise ClientError(f"not a server URL: {url!r} ({error})") from error
        self.client.close()
        self.client = switched

    def close(self) -> None:
        self.client.close()

    def server_info(self) -> dict[str, Any]:
        """The node's ``/info``."""
        info = self.client.get("/info")
        if not isinstance(info, dict) or not isinstance(info.get("KsqlServerInfo"), dict):
            raise ClientError(f"unexpected answer from {self.url}/info: {info!r:.200}")
        return dict(info["KsqlServerInfo"])

    def problem(self) -> str | None:
        """Why the node does not look like a node (ksqlDB's CLI's warning), or None."""
        try:
            self.server_info()
        except StatementFailedError as error:
            return f"Couldn't connect to the metastore server: {error.message}\n"
        except ClientError as error:
            return unreachable_warning(self.url, str(error))
        return None

    def check_property(self, name: str) -> None:
        """Raise the node's error when a request may not set ``name``."""
        self.client.get(f"/is_valid_property/{quote(name, safe='')}")

    def versions(self) -> tuple[str, str]:
        """The node's version and status, ``<unknown>`` when it does not answer."""
        try:
            info = self.server_info()
        except (ClientError, StatementFailedError):
            return UNKNOWN, UNKNOWN
        return str(info.get("version", UNKNOWN)), str(info.get("serverStatus") or UNKNOWN)


def unreachable_warning(url: str, error: str) -> str:
    """ksqlDB's CLI's block for a server it cannot reach."""
    explanation = textwrap.fill(
        f"Remote server at {url} does not appear to be a valid metastore server. Please ensure "
        "that the URL provided is for an active metastore server.", CONSOLE_WIDTH)
    return "\n".join(["", "ERROR".center(CONSOLE_WIDTH, "*"), explanation, "",
                      "The server responded with the following error: ", error,
                      "*" * CONSOLE_WIDTH, ""])

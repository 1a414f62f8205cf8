"""Errors of talking to a Schema Registry: unreachable or misbehaving (a 503 for the client), the
node's own credentials refused (a 500), or an answer that refuses what the statement sent (a 400,
with the registry's own error code)."""

from __future__ import annotations

from metastore.core.exceptions import MetastoreError


class SchemaRegistryError(MetastoreError):
    """The registry refused a call; ``error_code``: its own (Confluent's, e.g. 42201), or the
    HTTP status when it gave none."""

    code = "schema_registry"

    def __init__(self, message: str, error_code: int) -> None:
        super().__init__(message)
        self.error_code = error_code


class SchemaRegistryUnavailableError(SchemaRegistryError):
    """The registry did not answer (refused, timed out, a 5xx, a 408 or 429), or answered
    something that is not its API's JSON: nothing that needed it was done."""

    code = "schema_registry_unavailable"


class SchemaRegistryAccessError(SchemaRegistryError):
    """The registry refused the node's credentials (401, 403, 407): the node's configuration, not
    the statement, is at fault."""

    code = "schema_registry_access"


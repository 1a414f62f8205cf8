"""Errors of talking to a Schema Registry: unreachable (a 50x for the client), or an answer that
refuses the call (with the registry's own error code)."""

from __future__ import annotations

from metastore.exceptions import MetastoreError


class SchemaRegistryError(MetastoreError):
    """The registry refused a call; ``error_code``: its own (Confluent's, e.g. 42201), or the
    HTTP status when it gave none."""

    code = "schema_registry"

    def __init__(self, message: str, error_code: int) -> None:
        super().__init__(message)
        self.error_code = error_code


class SchemaRegistryUnavailableError(SchemaRegistryError):
    """The registry did not answer (refused, timed out, a 5xx): nothing that needed it was done."""

    code = "schema_registry_unavailable"


"""What a shell session keeps between statements, as ksqlDB's CLI keeps it: the variables of
``--define`` and DEFINE (sent as ``sessionVariables``), the properties of ``--config-file`` and
SET (sent as ``streamsProperties``), and the limits of ``--query-row-limit`` and
``--query-timeout`` on the queries it runs."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from metastore.sql.variables import Variables


class SessionError(Exception):
    """A session statement that cannot be applied (UNSET of a property never set)."""


@dataclass
class Session:
    variables: Variables = field(default_factory=Variables)
    properties: dict[str, str] = field(default_factory=dict)
    row_limit: int | None = None
    timeout_ms: int | None = None

    @property
    def variable_values(self) -> dict[str, str]:
        return dict(self.variables.items())

    def set_property(self, name: str, value: str) -> str:
        """Set a request property; ksqlDB's CLI's report of it."""
        prior = self.properties.get(name)
        self.properties[name] = value
        if prior is None:
            return (f"Successfully changed local property '{name}' to '{value}'. Use the UNSET "
                    "command to revert your change.")
        return f"Successfully changed local property '{name}' from '{prior}' to '{value}'."

    def unset_property(self, name: str) -> str:
        """Forget a request property; ksqlDB's CLI's report of it."""
        if name not in self.properties:
            raise SessionError(f"Cannot unset local property '{name}' which was never set in the "
                               "first place")
        prior = self.properties.pop(name)
        return f"Successfully unset local property '{name}' (value was '{prior}')."

    def define(self, name: str, value: str) -> None:
        self.variables.define(name, value)

    def undefine(self, name: str) -> str | None:
        """Forget a variable; ksqlDB's CLI's warning when it was not defined."""
        if self.variables.undefine(name):
            return None
        return f"Cannot undefine variable '{name}' which was never defined."

    def variables_entity(self, statement_text: str) -> dict[str, Any]:
        """SHOW VARIABLES answered from the session, in the node's entity."""
        return {"@type": "variables", "statementText": statement_text,
                "variables": [{"name": name, "value": value}
                              for name, value in self.variables.items()]}

"""Connection settings shared by every client a node creates."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

LIBRDKAFKA_LOGGER = logging.getLogger("metastore.librdkafka")


@dataclass(frozen=True)
class KafkaSettings:
    """Bootstrap servers plus pass-through client settings (TLS, SASL, timeouts)."""

    bootstrap_servers: str
    client: Mapping[str, str] = field(default_factory=dict)

    def config(self, **overrides: Any) -> dict[str, Any]:
        """A librdkafka configuration: the common settings, then ``overrides``."""
        config: dict[str, Any] = {"bootstrap.servers": self.bootstrap_servers,
                                  "logger": LIBRDKAFKA_LOGGER}
        config.update(self.client)
        config.update({key.replace("_", "."): value for key, value in overrides.items()})
        return config

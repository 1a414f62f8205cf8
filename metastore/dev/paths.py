"""Where the local infrastructure keeps its caches and state.

``METASTORE_CACHE_DIR`` wins; in a source checkout the default is ``<checkout>/.cache`` (git-ignored),
otherwise ``~/.cache/metastore``. ``METASTORE_DEV_DIR`` moves only the local clusters' state.
"""

from __future__ import annotations

import os
from pathlib import Path


def source_checkout() -> Path | None:
    """The project checkout this package runs from, if it runs from one."""
    root = Path(__file__).resolve().parents[2]
    return root if (root / "pyproject.toml").is_file() and (root / "metastore").is_dir() else None


def cache_dir() -> Path:
    override = os.environ.get("METASTORE_CACHE_DIR")
    if override:
        return Path(override).expanduser().resolve()
    checkout = source_checkout()
    if checkout is not None:
        return checkout / ".cache"
    return Path.home() / ".cache" / "metastore"


def jar_dir(jar_set: str) -> Path:
    return cache_dir() / "jars" / jar_set


def dev_dir() -> Path:
    """State of the processes `metastore dev` starts (pids, logs, data): ``METASTORE_DEV_DIR``,
    or ``dev/`` in the cache directory."""
    override = os.environ.get("METASTORE_DEV_DIR")
    return Path(override).expanduser().resolve() if override else cache_dir() / "dev"

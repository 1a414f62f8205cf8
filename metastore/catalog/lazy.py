"""A mapping whose restored values are decoded on first access, so a restart is not O(catalog).

A checkpoint restores tens of thousands of sources; decoding them all before the node is READY
would make every restart as slow as the catalog is large. :class:`LazyDict` keeps the restored
entries encoded and decodes one when it is first read; the decoded value is cached (the cache is
shared by every later generation, since a restored entry never changes: a write replaces it).

It behaves as a dict: insertion order (a replaced key keeps its place), ``copy`` for the image's
copy-on-write deltas. Images are read from many threads: reading only ever adds to the cache,
which is never iterated, so readers cannot disturb each other.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, MutableMapping
from itertools import chain
from typing import Generic, TypeVar

V = TypeVar("V")


class LazyDict(MutableMapping[str, V], Generic[V]):
    def __init__(self, encoded: dict[str, int], decode: Callable[[int], V],
                 values: dict[str, V] | None = None, added: dict[str, None] | None = None,
                 cache: dict[str, V] | None = None) -> None:
        self._encoded = encoded
        """Restored keys still present, in their order, with the handle ``decode`` takes."""
        self._decode = decode
        self._values = values if values is not None else {}
        """Values written since the restore (replacing restored ones, or new)."""
        self._added = added if added is not None else {}
        """Keys written since the restore that were not restored, in insertion order."""
        self._cache = cache if cache is not None else {}

    def __getitem__(self, key: str) -> V:
        try:
            return self._values[key]
        except KeyError:
            pass
        handle = self._encoded[key]  # a key not restored, or deleted since, is a KeyError
        try:
            return self._cache[key]
        except KeyError:
            pass
        value = self._decode(handle)
        self._cache[key] = value
        return value

    def __setitem__(self, key: str, value: V) -> None:
        self._values[key] = value
        if key not in self._encoded:
            self._added[key] = None

    def __delitem__(self, key: str) -> None:
        if key in self._encoded:
            del self._encoded[key]
            self._values.pop(key, None)
        elif key in self._added:
            del self._added[key]
            del self._values[key]
        else:
            raise KeyError(key)

    def __contains__(self, key: object) -> bool:
        return key in self._encoded or key in self._added

    def __iter__(self) -> Iterator[str]:
        return chain(self._encoded, self._added)

    def __len__(self) -> int:
        return len(self._encoded) + len(self._added)

    def copy(self) -> LazyDict[V]:
        return LazyDict(dict(self._encoded), self._decode, dict(self._values), dict(self._added),
                        self._cache)

    def decode_all(self) -> None:
        """Decode every restored entry now (raising now, if one does not decode)."""
        for key in self._encoded:
            self[key]

    @property
    def decoded(self) -> int:
        """How many restored entries have been decoded so far (observation only)."""
        return len(self._cache)

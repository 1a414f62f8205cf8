"""User-defined functions loaded from Python modules, as ksqlDB loads UDFs from
``ksql.extension.dir``.

An extension is an importable module exporting ``FUNCTIONS: tuple[FunctionSpec, ...]``, declared
as the built-ins are (:mod:`metastore.functions.registry`: names, kind, signatures, Spark
translation or None). :func:`load` imports the modules named, checks every name they declare
against the built-ins and the extensions already loaded, and adds them to the index of
:mod:`metastore.functions.library`, so typing, translation, the runtime check and SHOW
FUNCTIONS see them as any other function. Loading is explicit configuration (the node setting
``function_modules``, the CLI's ``--function-module``), never discovery; every node of a service
must load the same modules, or they would accept and type statements differently. Loading a
module again is a no-op; a module is loaded whole or not at all.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable

from metastore.core.exceptions import MetastoreError
from metastore.functions import library
from metastore.functions.registry import FunctionSpec


class ExtensionError(MetastoreError):
    """A function module that cannot be loaded; ``module`` names it."""

    code = "bad_function_module"

    def __init__(self, module: str, message: str) -> None:
        super().__init__(f"function module {module}: {message}")
        self.module = module


class FunctionClashError(ExtensionError):
    """A function module declaring a name a built-in or another extension already has."""

    code = "function_name_clash"

    def __init__(self, module: str, name: str, owner: str) -> None:
        super().__init__(module, f"declares the function {name}, which {owner} already "
                         "declares; a function name can be declared once")
        self.name = name
        self.owner = owner


_LOADED: dict[str, tuple[FunctionSpec, ...]] = {}
"""The modules loaded, in order, with the functions each added."""
_OWNERS: dict[str, str] = {}
"""The (upper-cased) name of every extension function, and the module declaring it."""


def load(module_names: Iterable[str]) -> tuple[str, ...]:
    """Load the function modules named (in order; those already loaded are skipped) and return
    the names of the functions they added."""
    added: list[str] = []
    for module_name in module_names:
        if module_name in _LOADED:
            continue
        specs = _declared(module_name)
        names = _check(module_name, specs)
        library.install(specs)
        _LOADED[module_name] = specs
        _OWNERS.update(dict.fromkeys(names, module_name))
        added += names
    return tuple(added)


def loaded() -> tuple[str, ...]:
    """The function modules loaded, in the order they were."""
    return tuple(_LOADED)


def unload(module_name: str) -> None:
    """Take a module's functions out of the index again (tests; a node never unloads)."""
    specs = _LOADED.pop(module_name, ())
    library.uninstall(specs)
    for name in [n for n, owner in _OWNERS.items() if owner == module_name]:
        del _OWNERS[name]


def _declared(module_name: str) -> tuple[FunctionSpec, ...]:
    try:
        module = importlib.import_module(module_name)
    except Exception as error:  # an extension's own import failure, whatever it is
        raise ExtensionError(module_name, f"cannot be imported: {error}") from error
    specs = getattr(module, "FUNCTIONS", None)
    if not isinstance(specs, tuple | list) or not all(isinstance(s, FunctionSpec) for s in specs):
        raise ExtensionError(module_name, "must export FUNCTIONS, a tuple of FunctionSpec "
                             "(see metastore.functions.registry)")
    return tuple(specs)


def _check(module_name: str, specs: tuple[FunctionSpec, ...]) -> list[str]:
    """The module's names, upper-cased, once each clash is ruled out."""
    seen: list[str] = []
    for function in specs:
        if not function.signatures:
            raise ExtensionError(module_name, f"the function {function.name} declares no "
                                 "signature")
        for name in (n.upper() for n in function.names):
            if library.is_built_in(name):
                raise FunctionClashError(module_name, name, "a built-in function")
            owner = _OWNERS.get(name)
            if owner is not None:
                raise FunctionClashError(module_name, name, f"the function module {owner}")
            if name in seen:
                raise FunctionClashError(module_name, name, "the same module")
            seen.append(name)
    return seen

"""Function extensions (metastore.functions.extensions): a module's FUNCTIONS join the index,
type and translate as the built-ins do; a clashing name is refused; loading is idempotent; and
ksqlDB's test UDFs (integration.conformance.ksql_test_functions) resolve as ksqlDB's UdfIndex does."""

from __future__ import annotations

import sys
import types
from collections.abc import Iterator

import pytest
from sqlglot import exp

from metastore.functions import extensions
from metastore.functions import library as functions
from metastore.functions import sparksql as sql
from metastore.functions.extensions import ExtensionError, FunctionClashError
from metastore.functions.registry import Call, FunctionError, FunctionSpec, scalar, sig
from metastore.server.settings import SettingsError, server_settings
from metastore.sql import types as ty
from metastore.testing.check import run_script

MODULE = "tests_unit_ext_shout"
OTHER = "tests_unit_ext_other"
TEST_FUNCTIONS = "integration.conformance.ksql_test_functions"


def _shout(call: Call) -> exp.Expr:
    return sql.fn("concat", sql.fn("upper", call.args[0]), sql.lit("!"))


def _module(name: str, *specs: FunctionSpec, exported: object = None) -> None:
    module = types.ModuleType(name)
    module.FUNCTIONS = specs if exported is None else exported  # type: ignore[attr-defined]
    sys.modules[name] = module


@pytest.fixture
def shout() -> Iterator[str]:
    _module(MODULE, scalar("SHOUT", sig(ty.STRING, returns=ty.STRING), spark=_shout))
    yield MODULE
    for name in (MODULE, OTHER):
        extensions.unload(name)
        sys.modules.pop(name, None)


@pytest.fixture
def test_functions() -> Iterator[None]:
    extensions.load([TEST_FUNCTIONS])
    yield
    extensions.unload(TEST_FUNCTIONS)


def test_an_extension_function_types_and_translates(shout: str) -> None:
    assert functions.lookup("SHOUT") is None
    assert extensions.load([shout]) == ("SHOUT",)
    assert "SHOUT" in functions.names()
    assert functions.resolve_call("shout", [ty.STRING]).returns == ty.STRING
    with pytest.raises(FunctionError, match=r"Function 'SHOUT' does not accept parameters "
                                            r"\(INTEGER\)"):
        functions.resolve_call("SHOUT", [ty.INTEGER])
    script = ("CREATE STREAM S (K STRING KEY, V STRING) WITH (KAFKA_TOPIC='s', "
              "VALUE_FORMAT='JSON');\nCREATE STREAM O AS SELECT K, SHOUT(V) AS L FROM S;")
    results, image = run_script(script)
    assert all(r.ok for r in results), results[-1].message
    assert image.sources["O"].schema_text() == "K STRING KEY, L STRING"
    call = exp.Anonymous(this="SHOUT", expressions=[exp.column("V")])
    functions.annotate(call.expressions[0], ty.STRING)
    functions.annotate(call, ty.STRING)
    assert functions.to_spark(call).sql(dialect="spark") == "CONCAT(UPPER(V), '!')"


def test_loading_is_idempotent(shout: str) -> None:
    assert extensions.load([shout]) == ("SHOUT",)
    assert extensions.load([shout, shout]) == ()
    assert extensions.loaded().count(shout) == 1


def test_a_name_clash_is_refused(shout: str) -> None:
    _module(OTHER, scalar("ucase", sig(ty.STRING, returns=ty.STRING)))
    with pytest.raises(FunctionClashError, match="UCASE, which a built-in function already"):
        extensions.load([OTHER])
    extensions.load([shout])
    _module(OTHER, scalar(("OTHER_ONE", "shout"), sig(ty.STRING, returns=ty.STRING)))
    with pytest.raises(FunctionClashError, match=f"the function module {MODULE}") as refused:
        extensions.load([OTHER])
    assert refused.value.code == "function_name_clash"
    assert functions.lookup("OTHER_ONE") is None  # a module loads whole or not at all


def test_a_module_without_functions_is_refused(shout: str) -> None:
    _module(OTHER, exported="nothing")
    with pytest.raises(ExtensionError, match="must export FUNCTIONS"):
        extensions.load([OTHER])
    with pytest.raises(ExtensionError, match="cannot be imported"):
        extensions.load(["tests_unit_ext_no_such_module"])


def test_unloading_restores_the_index(shout: str) -> None:
    extensions.load([shout])
    extensions.unload(shout)
    assert functions.lookup("SHOUT") is None
    assert functions.lookup("UCASE") is not None


@pytest.mark.usefixtures("test_functions")
@pytest.mark.parametrize(("call", "message"), [
    ("MULTI_ARG(FIRST, SECOND)", "Function 'MULTI_ARG' does not accept parameters "
                                 "(BIGINT, STRING)."),
    ("MULTI_ARG(SECOND, 5, '10', '20', '3')", "Function 'MULTI_ARG' does not accept parameters "
                                              "(STRING, INTEGER, STRING, STRING, STRING)."),
    ("MID_VAR_ARG(FIRST, I, 3, 2)", "Function 'MID_VAR_ARG' does not accept parameters "
                                    "(BIGINT, INTEGER, INTEGER, INTEGER)."),
    ("VAR_ARG(FIRST, I)", "Function 'VAR_ARG' does not accept parameters (BIGINT, INTEGER)."),
    ("MULTI_ARG(FIRST, SECOND, 5, SECOND)", "Parameter 4 passed to function MULTI_ARG must be "
                                            "a literal constant"),
])
def test_ksql_test_udafs_resolve_as_ksqldb(call: str, message: str) -> None:
    results, _ = run_script(
        "CREATE STREAM I (ID BIGINT KEY, FIRST BIGINT, SECOND STRING, I INT) WITH "
        "(KAFKA_TOPIC='i', VALUE_FORMAT='JSON');\n"
        f"CREATE TABLE O AS SELECT ID, {call} AS R FROM I GROUP BY ID;", runtime_check=False)
    assert not results[-1].ok
    assert message in results[-1].message


@pytest.mark.usefixtures("test_functions")
@pytest.mark.parametrize("call", [
    "MULTI_ARG(FIRST, SECOND, 5)", "MULTI_ARG(FIRST, SECOND, 5, '1', '22')",
    "MID_VAR_ARG(FIRST, 2, 3)", "MID_VAR_ARG(FIRST, SECOND, SECOND, 2, 3)",
    "VAR_ARG(FIRST)", "VAR_ARG(FIRST, SECOND, SECOND)", "TEST_UDAF(I)",
])
def test_ksql_test_udafs_accept_and_run(call: str) -> None:
    results, image = run_script(
        "CREATE STREAM I (ID BIGINT KEY, FIRST BIGINT, SECOND STRING, I INT) WITH "
        "(KAFKA_TOPIC='i', VALUE_FORMAT='JSON');\n"
        f"CREATE TABLE O AS SELECT ID, {call} AS R FROM I GROUP BY ID;")
    assert results[-1].ok, results[-1].message
    assert image.sources["O"].schema_text().endswith("R BIGINT")


@pytest.mark.usefixtures("test_functions")
def test_ksql_test_udfs_type_as_ksqldb() -> None:
    assert functions.resolve_call("TEST_UDF", [ty.BIGINT, None]).signature.params == (
        ty.BIGINT, ty.STRING)
    assert functions.resolve_call("TEST_UDF", [ty.BIGINT] * 5).signature.variadic
    assert functions.resolve_call("TEST_UDF", []).returns == ty.StructType((("A", ty.STRING),))
    assert functions.resolve_call("BAD_UDF", [ty.BOOLEAN]).returns == ty.INTEGER
    results, _ = run_script(
        "CREATE STREAM I (K STRING KEY, V STRING) WITH (KAFKA_TOPIC='i', VALUE_FORMAT='JSON');\n"
        "CREATE STREAM O AS SELECT K, BAD_UDF(V) FROM I;")
    assert "BAD_UDF(STRING) returns NULL at every other call" in results[-1].message


def test_the_node_setting_names_modules_explicitly() -> None:
    settings = server_settings({"bootstrap_servers": "k:9092",
                                "function_modules": ["a.b", "c", "a.b"]})
    assert settings.function_modules == ("a.b", "c")
    assert server_settings({"bootstrap_servers": "k:9092"}).function_modules == ()
    with pytest.raises(SettingsError, match="function_modules"):
        server_settings({"bootstrap_servers": "k:9092", "function_modules": [3]})

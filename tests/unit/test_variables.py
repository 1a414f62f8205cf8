"""Session variables: ksqlDB's VariableSubstitutor cases, DEFINE / UNDEFINE / SHOW VARIABLES in
a request, and the session statements' entities."""

from __future__ import annotations

import re

import pytest

from metastore.catalog.exceptions import StatementError
from metastore.catalog.image import EMPTY_IMAGE
from metastore.core.limits import MAX_SUBSTITUTED_CHARS
from metastore.engine import overrides, responses
from metastore.engine.overrides import ConfigError
from metastore.engine.validation import Validator
from metastore.server.node import answered
from metastore.sql import statements as st
from metastore.sql.exceptions import TooComplexError, VariableError
from metastore.sql.variables import Variables, parse_request, substitute, substitution_enabled
from metastore.testing.check import AssumedTopics, run_script

VALUES = Variables({
    "identifier": "_id_", "quotedIdentifier": '"_id_"', "backQuotedIdentifier": "`_id_`",
    "topicName": "'name1'", "replicas": "3", "num": "1", "dec": "0.32", "bool": "false",
    "str": "'john'", "escapeQuote": "'t1', value_format='AVRO'", "env": "qa", "name": "foo"})


@pytest.mark.parametrize(("text", "expected"), [
    # ksqlDB's VariableSubstitutorTest
    ("DESCRIBE ${identifier};", "DESCRIBE _id_;"),
    ("DESCRIBE ${quotedIdentifier} EXTENDED;", 'DESCRIBE "_id_" EXTENDED;'),
    ("DESCRIBE FUNCTION ${backQuotedIdentifier};", "DESCRIBE FUNCTION `_id_`;"),
    ("INSERT INTO ${identifier} VALUES (${num}, ${bool}, ${dec}, ${str});",
     "INSERT INTO _id_ VALUES (1, false, 0.32, 'john');"),
    ("CREATE STREAM ${identifier} WITH (kafka_topic=${topicName}, replicas=${replicas});",
     "CREATE STREAM _id_ WITH (kafka_topic='name1', replicas=3);"),
    ("CREATE STREAM s1 WITH (kafka_topic=${escapeQuote});",
     "CREATE STREAM s1 WITH (kafka_topic='t1'', value_format=''AVRO');"),
    ("DEFINE topicName = 'topic_${env}';", "DEFINE topicName = 'topic_qa';"),
    ("DEFINE topicName = 'topic_$${env}';", "DEFINE topicName = 'topic_${env}';"),
    ("ASSERT TOPIC '${name}';", "ASSERT TOPIC 'foo';"),
    ("ASSERT TOPIC ${name};", "ASSERT TOPIC foo;"),
    # names in column lists, qualifiers; comments and undefined names in strings stay
    ("CREATE STREAM s (${identifier} INT KEY) WITH (kafka_topic='x');",
     "CREATE STREAM s (_id_ INT KEY) WITH (kafka_topic='x');"),
    ("INSERT INTO s (${identifier}) VALUES (${str});", "INSERT INTO s (_id_) VALUES ('john');"),
    ("SELECT ${identifier}.a FROM s WHERE a = ${num} AND b = '${nope}' -- ${nope}\n;",
     "SELECT _id_.a FROM s WHERE a = 1 AND b = '${nope}' -- ${nope}\n;"),
    ("SELECT `${num}` FROM s;", "SELECT `${num}` FROM s;"),
    ("SELECT * FROM s WHERE a = ${IDENTIFIER_not_defined_but_case} OR b = ${NUM};",
     None),
])
def test_substitution_follows_ksqldb(text: str, expected: str | None) -> None:
    if expected is None:
        with pytest.raises(VariableError):
            substitute(text, VALUES)
        return
    assert substitute(text, VALUES) == expected


@pytest.mark.parametrize(("text", "value", "message"), [
    ("INSERT INTO ${v} VALUES (1);", "s1 (id, name)", "Illegal argument at Line: 1, Col: 13. "
     "Identifier names cannot start with '@' and may only contain alphanumeric values and '_'. "
     "Got: 's1 (id, name)'"),
    ("INSERT INTO s1 VALUES (${v});", "1, 5", "Illegal argument at Line: 1, Col: 24. Got: '1, 5'"),
    ("SELECT * FROM ${v};", "s1 WHERE id = 1", "Identifier names cannot start"),
    ("SELECT * FROM s1 WHERE id = ${v};", "5 and id != 5", "Illegal argument"),
    ("DESCRIBE ${v};", "EXTENDED _id_", "Illegal argument"),
    ("DESCRIBE ${v};", "'EXTENDED _id_'", "Illegal argument"),
    ("DESCRIBE ${v};", '"EXTENDED _id_"', "Illegal argument"),
    ("DESCRIBE ${v};", "@x", "Identifier names cannot start with '@'"),
])
def test_values_that_would_inject_sql_are_refused(text: str, value: str, message: str) -> None:
    with pytest.raises(VariableError) as raised:
        substitute(text, Variables({"v": value}))
    assert message in raised.value.message


def test_an_undefined_variable_is_an_illegal_argument_where_it_stands() -> None:
    with pytest.raises(VariableError, match=r"Line: 2, Col: 10\. .*Got: '\$\{x\}'"):
        parse_request("SHOW STREAMS;\nDESCRIBE ${x};")
    with pytest.raises(VariableError, match=r"Illegal argument at Line: 1, Col: 31\. Got"):
        parse_request("SELECT * FROM s WHERE a = 1 + ${x};")


def test_define_undefine_and_show_variables_in_one_request() -> None:
    statements = parse_request(
        "DEFINE a = 'S1'; DEFINE b = '${a}_x'; SHOW VARIABLES; UNDEFINE A; UNDEFINE a;\n"
        "DESCRIBE ${B} EXTENDED; SHOW VARIABLES;", {"c": 1, "d": True})
    define_b = statements[1]
    assert isinstance(define_b, st.DefineVariable) and define_b.value == "S1_x"
    listed = statements[2]
    assert isinstance(listed, st.ListVariables)
    assert listed.variables == (("a", "S1"), ("b", "S1_x"), ("c", "1"), ("d", "true"))
    first, second = statements[3], statements[4]
    assert isinstance(first, st.UndefineVariable) and first.defined
    assert isinstance(second, st.UndefineVariable) and not second.defined
    describe = statements[5]
    assert isinstance(describe, st.Describe) and describe.name == "S1_X"
    assert describe.text == "DESCRIBE S1_x EXTENDED;" and describe.extended
    last = statements[6]
    assert isinstance(last, st.ListVariables)
    assert last.variables == (("b", "S1_x"), ("c", "1"), ("d", "true"))
    entities = [responses.read_entity(s, EMPTY_IMAGE) for s in statements[2:5]]
    kept = answered(statements[2:5], entities)
    assert [e["@type"] for e in kept] == ["variables", "warning_entity"]
    assert kept[0]["variables"][0] == {"name": "a", "value": "S1"}
    assert kept[1]["message"] == "Cannot undefine variable 'a' which was never defined"


def test_a_variable_redefined_keeps_its_first_spelling() -> None:
    [*_, listed] = parse_request("DEFINE Env = 'a'; DEFINE ENV = 'b'; SHOW VARIABLES;")
    assert isinstance(listed, st.ListVariables) and listed.variables == (("Env", "b"),)


def test_substitution_can_be_turned_off_by_a_boolean_override() -> None:
    assert not substitution_enabled({"ksql.variable.substitution.enable": False})
    assert substitution_enabled({"ksql.variable.substitution.enable": "false"})  # as ksqlDB
    [statement] = parse_request("SELECT '${a}' FROM s;", {"a": "x"}, substitution=False)
    assert isinstance(statement, st.SelectStatement) and "'${a}'" in statement.text


def test_a_script_uses_its_variables_and_writes_the_substituted_text() -> None:
    results, image = run_script(
        "DEFINE name = 'pageviews'; DEFINE topic = 'pv';"
        "CREATE STREAM ${name} (id INT KEY, url STRING) WITH (kafka_topic='${topic}', "
        "value_format='JSON', partitions=1);")
    assert all(r.ok for r in results), results
    source = image.sources["PAGEVIEWS"]
    assert source.topic == "pv" and "'pv'" in source.statement


def test_unset_and_refused_properties() -> None:
    validator = Validator(EMPTY_IMAGE, AssumedTopics(),
                          config=overrides.resolve({"ksql.streams.cache.max.bytes.buffering": 0}))
    for statement in parse_request("SET 'auto.offset.reset' = 'earliest';"
                                   "UNSET 'ksql.streams.cache.max.bytes.buffering';"):
        validator.validate(statement)
    assert validator.config.given == {"auto.offset.reset": "earliest"}
    for value, message in (("none", "'none' is not valid for this property within KSQL"),
                           ("EARLIEST", "Invalid value EARLIEST for configuration "
                            "auto.offset.reset: String must be one of: latest, earliest, none")):
        with pytest.raises(ConfigError, match=re.escape(message)):
            validator.validate(parse_request(f"SET 'auto.offset.reset' = '{value}';")[0])
    with pytest.raises(ConfigError, match=r"Unknown property: ksql\.nope"):
        validator.validate(parse_request("UNSET 'ksql.nope';")[0])
    with pytest.raises(ConfigError, match="denylist"):
        validator.validate(parse_request("SET 'ksql.service.id' = 'x';")[0])


def test_show_properties_lists_the_node_defaults_and_the_overrides() -> None:
    config = overrides.resolve({"auto.offset.reset": "earliest",
                                "ksql.persistence.default.format.value": "JSON"})
    [statement] = parse_request("SHOW PROPERTIES;")
    entity = responses.read_entity(statement, EMPTY_IMAGE, config=config,
                                   server={"ksql.service.id": "demo"})
    values = {p["name"]: p["value"] for p in entity["properties"]}
    assert values["ksql.streams.auto.offset.reset"] == "earliest"
    assert values["ksql.persistence.default.format.value"] == "JSON"
    assert values["ksql.service.id"] == "demo"
    assert values["ksql.persistence.default.format.key"] == "KAFKA"
    assert "ksql.streams.auto.offset.reset" in entity["overwrittenProperties"]
    assert "ksql.persistence.default.format.key" in entity["defaultProperties"]
    assert "ksql.streams.auto.offset.reset" not in entity["defaultProperties"]
    offset = next(p for p in entity["properties"] if p["name"] == "ksql.streams.auto.offset.reset")
    assert offset["editable"] and offset["scope"] == "KSQL"


def test_functions_are_listed_and_described_from_the_registry() -> None:
    show, describe, table = parse_request(
        "SHOW FUNCTIONS; DESCRIBE FUNCTION substring; DESCRIBE FUNCTION explode;")
    listed = responses.read_entity(show, EMPTY_IMAGE)
    by_name = {f["name"]: f for f in listed["functions"]}
    assert by_name["SUBSTRING"] == {"name": "SUBSTRING", "type": "SCALAR", "category": "STRING"}
    assert by_name["COUNT"]["type"] == "AGGREGATE"
    assert by_name["EXPLODE"]["type"] == "TABLE"
    described = responses.read_entity(describe, EMPTY_IMAGE)
    assert described["@type"] == "describe_function" and described["name"] == "SUBSTRING"
    shapes = [([a["type"] for a in f["arguments"]], f["returnType"])
              for f in described["functions"]]
    assert (["STRING", "INTEGER"], "STRING") in shapes
    assert responses.read_entity(table, EMPTY_IMAGE)["functions"][0]["returnType"] == "T"
    with pytest.raises(StatementError, match="Can't find any functions with the name 'NOPE'"):
        Validator(EMPTY_IMAGE, AssumedTopics()).validate(
            parse_request("DESCRIBE FUNCTION nope;")[0])


def test_huge_expansion_is_refused_without_building_it() -> None:
    import tracemalloc

    from metastore.sql.exceptions import TooComplexError
    from metastore.sql.variables import parse_request as _parse_request

    body = "INSERT INTO s VALUES (" + ", ".join(["${a}"] * 2000) + ");"
    tracemalloc.start()
    try:
        with pytest.raises(TooComplexError):
            _parse_request(body, {"a": "'" + "x" * 20_000 + "'"})
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 10 * 1024 * 1024


def test_huge_expansion_in_a_string_is_refused() -> None:
    from metastore.sql.exceptions import TooComplexError
    from metastore.sql.variables import parse_request as _parse_request

    body = "SET 'x' = '" + "${a}" * 2000 + "';"
    with pytest.raises(TooComplexError):
        _parse_request(body, {"a": "x" * 20_000})


def test_quoted_value_inside_a_string_is_not_guarded_as_in_ksqldb() -> None:
    from metastore.sql.variables import Variables, substitute

    text = "SELECT * FROM s WHERE name = '${n}';"
    assert (substitute(text, Variables({"n": "' OR TRUE OR '"}))
            == "SELECT * FROM s WHERE name = '' OR TRUE OR '';")


def test_many_substituted_statements_parse() -> None:
    from metastore.sql.variables import parse_request as _parse_request

    body = "".join(f"DEFINE v{i} = '${{a}}';" for i in range(3000))
    statements = _parse_request(body, {"a": "x"})
    assert len(statements) == 3000
    assert statements[-1].name == "v2999" and statements[-1].value == "x"


def test_substitution_may_add_at_most_a_bounded_number_of_characters_to_a_request() -> None:
    """A 2 KB body of ${b} references would otherwise expand into a megabyte per handful of
    statements: the request is refused before the statement that crosses the bound is parsed."""
    kilobyte = "x" * 1000
    head = f"DEFINE a = '{kilobyte}'; DEFINE b = '{'${a}' * 100}'; "
    fits = head + " ".join("INSERT INTO S (V) VALUES ('${b}');" for _ in range(9))
    assert len(parse_request(fits)) == 11
    too_much = head + " ".join("INSERT INTO S (V) VALUES ('${b}');" for _ in range(11))
    with pytest.raises(TooComplexError, match=f"more than {MAX_SUBSTITUTED_CHARS} characters"):
        parse_request(too_much)

"""One table maps every typed error to its HTTP status and ksqlDB error code."""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import pytest

import metastore
from metastore.catalog import exceptions as catalog
from metastore.core.exceptions import MetastoreError
from metastore.kafka.exceptions import KafkaTopicError
from metastore.log.exceptions import (
    CatchUpTimeoutError,
    NotReadyError,
    NotWrittenError,
    OutcomeUnknownError,
)
from metastore.planner.exceptions import UnsupportedByRuntimeError
from metastore.server.http.answers import failure
from metastore.server.http.error_codes import ERROR_CODES, ErrorCode, classify, error_code
from metastore.spark.exceptions import SparkQueryError, SparkUnavailableError
from metastore.sql.exceptions import ParseError, TooComplexError

ROOT = Path(metastore.__file__).parent
ERROR_MODULES = sorted(
    {".".join(("metastore", *path.relative_to(ROOT).with_suffix("").parts))
     for path in ROOT.glob("*/exceptions.py")} | {"metastore.log.record"})


def subclasses(base: type) -> set[type]:
    found = set(base.__subclasses__())
    for sub in list(found):
        found |= subclasses(sub)
    return found


def test_every_typed_error_of_the_packages_is_in_the_table() -> None:
    for module in ERROR_MODULES:
        importlib.import_module(module)
    typed = {cls for cls in subclasses(MetastoreError) if cls.__module__ in ERROR_MODULES}
    assert len(typed) > 40
    missing = sorted(f"{cls.__module__}.{cls.__qualname__}" for cls in typed - set(ERROR_CODES))
    assert not missing, f"add these to metastore.server.http.error_codes.ERROR_CODES: {missing}"


def test_each_typed_error_has_its_own_machine_readable_code() -> None:
    codes = [cls.code for cls in ERROR_CODES]
    assert sorted(c for c in set(codes) if codes.count(c) > 1) == []


def test_statuses_agree_with_ksqldb_codes() -> None:
    for cls, answer in ERROR_CODES.items():
        assert answer.http_status == answer.code // 100, cls


@pytest.mark.parametrize(("error", "expected"), [
    (ParseError("no", 1, 1), ErrorCode(400, 40001)),
    (TooComplexError("deep", 1, 1), ErrorCode(400, 40001)),
    (catalog.SourceNotFoundError("X does not exist.", "X"), ErrorCode(400, 40001)),
    (catalog.TopicError("Cannot write into read-only topic: t", "t"), ErrorCode(400, 40001)),
    (catalog.UpgradeError("Upgrades not yet supported for StreamTableJoin"), ErrorCode(400, 40001)),
    (catalog.AssertionFailedError("Topic t does not exist", "t"), ErrorCode(417, 41700)),
    (UnsupportedByRuntimeError("The Spark runtime cannot run this query: x."), ErrorCode(400, 40001)),
    (KafkaTopicError("t", "Could not create the Kafka topic t"), ErrorCode(500, 50000)),
    (NotWrittenError("not written"), ErrorCode(500, 50000)),
    (OutcomeUnknownError("maybe written", "r1"), ErrorCode(500, 50000)),
    (NotReadyError("catching up"), ErrorCode(503, 50302)),
    (CatchUpTimeoutError("timed out", 7), ErrorCode(503, 50301)),
    (SparkQueryError("Spark could not run the query"), ErrorCode(400, 40001)),
    (SparkUnavailableError("no Spark"), ErrorCode(503, 50302)),
    (MetastoreError("anything"), ErrorCode(500, 50000)),
])
def test_classify(error: MetastoreError, expected: ErrorCode) -> None:
    assert classify(error) == expected
    assert error_code(error) == expected.code


def test_a_class_not_in_the_table_gets_its_nearest_listed_base() -> None:
    class UnlistedError(catalog.SchemaError):
        pass

    class UnknownError(MetastoreError):
        pass

    assert classify(UnlistedError("bad schema")) == ErrorCode(400, 40001)
    assert classify(UnknownError("?")) == ErrorCode(500, 50000)


def test_a_maybe_written_answer_names_the_request_and_its_commands() -> None:
    error = OutcomeUnknownError("The commit timed out.", "req-7",
                                ["stream/S/create", "stream/T/create"])
    answer = failure(error, "CREATE STREAM S ...;")
    body = json.loads(answer.body)
    assert answer.status_code == 500 and body["error_code"] == 50000
    assert body["requestId"] == "req-7"
    assert body["commandIds"] == ["stream/S/create", "stream/T/create"]
    assert body["message"] == (
        "The commit timed out. The request may have been written: to learn its outcome, retry "
        "with the same request id (req-7), or check GET /status/stream/S/create.")
    unnamed = OutcomeUnknownError("The writer did not answer in time.", None)
    assert "send it again with a request id" in unnamed.message
    assert unnamed.with_commands(["table/T/create"]).command_ids == ("table/T/create",)

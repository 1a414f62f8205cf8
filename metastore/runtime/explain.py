"""The execution plan EXPLAIN and SHOW QUERIES EXTENDED show: Spark's plan of a query.

:class:`SparkExplainer` compiles what the validator resolved (a persistent query on its catalog,
or a transient SELECT) exactly as the runtime would start it, and asks Spark for the plan
without starting anything. A query the runtime cannot compile gets the reason instead of a
plan; one Spark refuses to plan (an analysis error, say) is the client's error
(:class:`~metastore.spark.exceptions.SparkQueryError`), and a Spark that does not answer is
:class:`~metastore.spark.exceptions.SparkUnavailableError`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from py4j.protocol import Py4JError, Py4JNetworkError
from pyspark.errors import PySparkException

from metastore.core.exceptions import MetastoreError
from metastore.engine.overrides import ConfigOverrides
from metastore.engine.pull_queries import check_select
from metastore.engine.validation import Explained
from metastore.planner.plan import compile_push, plan_of
from metastore.runtime import job
from metastore.spark.exceptions import SparkQueryError, SparkUnavailableError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


class SparkExplainer:
    def __init__(self, spark: Callable[[], SparkSession | None],
                 kafka_options: Mapping[str, str]) -> None:
        self._spark = spark
        self._kafka_options = dict(kafka_options)

    def __call__(self, explained: Explained, config: ConfigOverrides) -> str:
        spark = self._spark()
        if spark is None:
            return "(Spark is not running on this node yet: no plan)"
        image = explained.image
        try:
            if explained.query is not None:
                plan = plan_of(explained.query, image)
            else:
                assert explained.select is not None, "EXPLAIN of a query or of a SELECT"
                analysis = check_select(explained.select, image.sources, image.types,
                                        image.queries, config)
                plan = compile_push("EXPLAIN", analysis, dict(config.values))
        except MetastoreError as error:
            return f"(the runtime cannot plan this query: {error.message})"
        try:
            return job.explain(spark, plan, self._kafka_options)
        except Py4JNetworkError as error:
            raise SparkUnavailableError(f"Spark did not answer while planning the query: "
                                        f"{error}") from error
        except (PySparkException, Py4JError) as error:
            raise SparkQueryError.of("plan the query", error) from error


__all__ = ["SparkExplainer"]

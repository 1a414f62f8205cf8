"""The project's Spark SQL functions (the JVM catalog ``io.metastore.functions.SqlFunctions``)
are the ones a plan may call (metastore.jvm.classes.SQL_FUNCTIONS), in every session a node
starts: a plan that names one a node has not got is refused before it runs."""

from __future__ import annotations

from typing import Any

from metastore.jvm.classes import SQL_FUNCTIONS, SQL_FUNCTIONS_CATALOG
from metastore.spark.session import query_session


def test_the_catalog_lists_the_functions_plans_may_call_in_a_querys_own_session(
        spark: Any) -> None:
    session = query_session(spark)
    catalog = session._jsparkSession.sessionState().catalogManager().catalog(
        SQL_FUNCTIONS_CATALOG)
    gateway = spark.sparkContext._gateway
    listed = [identifier.name()
              for identifier in catalog.listFunctions(gateway.new_array(gateway.jvm.String, 0))]
    assert sorted(listed) == sorted(SQL_FUNCTIONS)
    [(number,)] = session.sql(f"SELECT {SQL_FUNCTIONS_CATALOG}.kafka_int(X'FFFFFFFE')").collect()
    assert number == -2

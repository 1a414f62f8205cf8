"""Create the projection's catalog objects in batches, beneath Spark SQL.

A ``CREATE VIEW`` through SQL parses and analyzes its query, tens of milliseconds per object
(and a ``CREATE TABLE`` resolves its data source), which at a thousand sources is most of a
reconcile. The objects of one kind differ only in their names, options, properties and (views)
their text and columns, so each is created as a copy of a template that Spark created itself
through SQL once per session: the project's JVM class ``io.metastore.catalog.CatalogClones``
copies the template per object and hands the copies to the session catalog, a batch per call.

A view's schema is the one :func:`metastore.spark.views.view_columns` declares, which is the
type its query casts every column to (Spark checks it against the query whenever the view is
read); the analysis a copy skips is therefore the one that cannot fail for the project's own
queries, and ``tests/spark/test_catalog_clones.py`` compares both ways on every column type.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from metastore.spark.types import quote, string_literal
from metastore.spark.views import CatalogObject, raw_options

if TYPE_CHECKING:
    from py4j.java_gateway import JavaObject
    from pyspark.sql import SparkSession

CLONES_CLASS = "io.metastore.catalog.CatalogClones"
TEMPLATE_TABLE = "__ms_template_kafka"
TEMPLATE_VIEW = "__ms_template_view"
"""The template objects' names: created, read and dropped at once, in the service's database."""


class CatalogClones:
    """Creates catalog objects as copies of templates; ``count_call`` is told of each call into
    Spark's catalog."""

    def __init__(self, spark: SparkSession, database: str, kafka_options: Mapping[str, str],
                 count_call: Callable[[], None]) -> None:
        self._spark = spark
        self._database = database
        self._kafka_options = dict(kafka_options)
        self._count_call = count_call
        self._templates: tuple[JavaObject, JavaObject] | None = None

    def create(self, objects: Sequence[CatalogObject]) -> None:
        """Create ``objects``: the tables in one call, then the views in another."""
        tables = [obj for obj in objects if not obj.is_view]
        views = [obj for obj in objects if obj.is_view]
        if not objects:
            return
        table_template, view_template = self._template_objects()
        jvm = self._spark._jvm
        assert jvm is not None
        clones = getattr(jvm, CLONES_CLASS)
        for template, batch in ((table_template, tables), (view_template, views)):
            if batch:
                self._count_call()
                clones.create(self._spark._jsparkSession, template, _batch_json(batch))

    def _template_objects(self) -> tuple[JavaObject, JavaObject]:
        """A Kafka table and a view over it, made through SQL, read back and dropped."""
        if self._templates is not None:
            return self._templates
        options = raw_options(TEMPLATE_TABLE, self._kafka_options)
        option_sql = ", ".join(f"{string_literal(k)} = {string_literal(v)}"
                               for k, v in sorted(options.items()))
        table = f"{quote(self._database)}.{quote(TEMPLATE_TABLE)}"
        view = f"{quote(self._database)}.{quote(TEMPLATE_VIEW)}"
        statements = [f"DROP VIEW IF EXISTS {view}", f"DROP TABLE IF EXISTS {table}",
                      f"CREATE TABLE {table} USING kafka OPTIONS ({option_sql})",
                      f"CREATE VIEW {view} AS SELECT key FROM {table}"]
        for statement in statements:
            self._count_call()
            self._spark.sql(statement)
        jvm = self._spark._jvm
        assert jvm is not None
        catalog = self._spark._jsparkSession.sessionState().catalog()
        database = jvm.scala.Option.apply(self._database)
        templates = []
        for name in (TEMPLATE_TABLE, TEMPLATE_VIEW):
            self._count_call()
            identifier = jvm.org.apache.spark.sql.catalyst.TableIdentifier(name, database)
            templates.append(catalog.getTableMetadata(identifier))
        for statement in statements[:2]:
            self._count_call()
            self._spark.sql(statement)
        self._templates = (templates[0], templates[1])
        return self._templates


def _batch_json(objects: Sequence[CatalogObject]) -> str:
    return json.dumps([
        {"database": obj.database, "name": obj.name, "properties": dict(obj.properties),
         **({"text": obj.text, "columns": list(obj.columns), "schema": obj.schema}
            if obj.is_view else {"options": dict(obj.options)})}
        for obj in objects])

"""The JVM a node's Spark driver runs in: its code cache holds the code compiled for every query
the node runs (metastore.spark.session.CODE_CACHE_OPTION), larger than JDK 17's default, which a
driver that ran many queries filled until Spark's RPC dispatcher failed."""

from __future__ import annotations

from typing import Any

from metastore.spark.session import CODE_CACHE_OPTION


def test_the_driver_reserves_the_larger_code_cache(spark: Any) -> None:
    management = spark.sparkContext._jvm.java.lang.management.ManagementFactory
    assert CODE_CACHE_OPTION in list(management.getRuntimeMXBean().getInputArguments())
    sizes = {pool.getName(): pool.getUsage().getMax() for pool in management
             .getMemoryPoolMXBeans()
             if "CodeHeap" in pool.getName() or pool.getName() == "CodeCache"}
    assert sum(sizes.values()) >= 500 * 1024 * 1024, sizes

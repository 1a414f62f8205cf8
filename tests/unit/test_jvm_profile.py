"""The benchmarks' JVM profile puts each CPU sample in the part of a record's path it belongs
to, whichever frame of the stack names it, and reads a process's CPU from Linux's accounts."""

from __future__ import annotations

import os

from integration.bench.jvm_profile import cpu_between, cpu_seconds, part_of

SINK_PULLS_ROWS = ["org.apache.spark.sql.kafka010.KafkaDataWriter.write",
                   "org.apache.spark.sql.execution.datasources.v2.DataWritingSparkTask.run"]


def test_a_parse_below_the_sink_that_pulls_its_rows_is_decoding() -> None:
    frames = ["com.fasterxml.jackson.core.JsonFactory._createContext",
              "org.apache.spark.sql.catalyst.json.JacksonParser.parse",
              "org.apache.spark.sql.catalyst.expressions.GeneratedClass$SpecificUnsafeProjection"
              ".apply", *SINK_PULLS_ROWS]
    assert part_of(frames) == "json_decode"


def test_a_send_is_the_kafka_write_and_row_copies_are_sparks() -> None:
    send = ["org.apache.kafka.common.record.DefaultRecord.writeTo",
            "org.apache.kafka.clients.producer.KafkaProducer.send", *SINK_PULLS_ROWS]
    copy = ["org.apache.spark.unsafe.Platform.copyMemory",
            "org.apache.spark.sql.catalyst.expressions.UnsafeRow.copy",
            "org.apache.spark.sql.execution.WholeStageCodegenEvaluatorFactory.hasNext"]
    assert (part_of(send), part_of(copy)) == ("kafka_write", "rows_and_expressions")


def test_kafka_streams_parts_and_unknown_frames() -> None:
    window = ["org.rocksdb.RocksDB.put",
              "org.apache.kafka.streams.state.internals.RocksDBWindowStore.put",
              "org.apache.kafka.streams.processor.internals.StreamTask.process"]
    assert part_of(window) == "state"
    assert part_of(["java.util.HashMap.getNode"]) == "other"


def test_cpu_seconds_are_this_process_threads() -> None:
    before = cpu_seconds(os.getpid())
    sum(i * i for i in range(2_000_000))
    spent = cpu_between(before, cpu_seconds(os.getpid()))
    assert spent["all_cpu_s"] > 0
    assert spent["jit_cpu_s"] == spent["gc_cpu_s"] == 0  # no JVM threads in Python

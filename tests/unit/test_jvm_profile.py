"""The benchmarks' JVM profile puts each CPU sample in the part of a record's path it belongs
to, whichever frame of the stack names it, and tells the JVM's own threads apart by the names
Linux gives them."""

from __future__ import annotations

import os

from integration.bench.jvm_profile import cpu_between, cpu_seconds, kind_of, part_of

SPARK_TASK = ["org.apache.spark.executor.Executor$TaskRunner.run",
              "org.apache.spark.scheduler.ResultTask.runTask",
              "org.apache.spark.sql.execution.datasources.v2.DataWritingSparkTask$.run",
              "org.apache.spark.sql.execution.WholeStageCodegenEvaluatorFactory"
              "$WholeStageCodegenPartitionEvaluator$$anon$1.hasNext",
              "org.apache.spark.sql.catalyst.expressions.GeneratedClass"
              "$GeneratedIteratorForCodegenStage1.processNext"]
STREAM_TASK = ["org.apache.kafka.streams.processor.internals.StreamThread.run",
               "org.apache.kafka.streams.processor.internals.StreamTask.process",
               "org.apache.kafka.streams.processor.internals.SourceNode.process",
               "org.apache.kafka.streams.processor.internals.ProcessorContextImpl.forward"]
"""Stacks outermost first, as the folded stacks are: a task pulling rows through its
generated code, and a stream task forwarding a record from its source node."""


def test_a_parse_inside_the_task_that_pulls_the_rows_is_decoding() -> None:
    parse = [*SPARK_TASK, "org.apache.spark.sql.catalyst.expressions.GeneratedClass"
             "$SpecificUnsafeProjection.apply",
             "org.apache.spark.sql.catalyst.json.JacksonParser.parse",
             "com.fasterxml.jackson.core.JsonFactory._createContext"]
    copy = [*SPARK_TASK, "org.apache.spark.unsafe.Platform.copyMemory"]
    read = [*SPARK_TASK, "org.apache.spark.sql.kafka010.KafkaBatchPartitionReader.next",
            "org.apache.spark.sql.kafka010.consumer.KafkaDataConsumer.get"]
    assert [part_of(s) for s in (parse, copy, read)] == [
        "json_decode", "rows_and_expressions", "kafka_read"]


def test_a_stream_tasks_parts_are_not_its_source_nodes() -> None:
    window = [*STREAM_TASK, "org.apache.kafka.streams.state.internals.CachingWindowStore.put"]
    send = [*STREAM_TASK, "org.apache.kafka.streams.processor.internals.RecordCollectorImpl.send",
            "org.apache.kafka.clients.producer.KafkaProducer.send"]
    forward = [*STREAM_TASK, "org.apache.kafka.streams.kstream.internals.KStreamFilter"
               "$KStreamFilterProcessor.process"]
    assert [part_of(s) for s in (window, send, forward)] == ["state", "kafka_write", "engine"]
    assert part_of([*STREAM_TASK[:2], "org.apache.kafka.streams.processor.internals"
                    ".SourceNode.deserialize"]) == "kafka_read"


def test_the_drivers_batch_planning_is_not_row_work() -> None:
    planning = ["org.apache.spark.sql.execution.streaming.runtime.MicroBatchExecution"
                ".runActivatedStream", "org.apache.spark.sql.catalyst.rules.RuleExecutor.execute"]
    assert part_of(planning) == "planning_and_scheduling"
    assert part_of(["java.util.HashMap.getNode"]) == "other"


def test_the_jvms_own_threads_by_their_linux_names() -> None:
    names = ["C2 CompilerThre", "C1 CompilerThre", "GC Thread#0", "G1 Conc#0", "G1 Refine#0",
             "VM Thread", "main", "Executor task "]
    assert [kind_of(name) for name in names] == ["jit", "jit", "gc", "gc", "gc", "gc", None,
                                                 None]


def test_cpu_seconds_count_this_process() -> None:
    before = cpu_seconds(os.getpid())
    sum(i * i for i in range(2_000_000))
    assert cpu_between(before, cpu_seconds(os.getpid()))["all_cpu_s"] > 0


def test_the_kafka_sink_pulling_its_rows_does_not_make_them_writes() -> None:
    sink = [*SPARK_TASK[:3], "org.apache.spark.sql.kafka010.KafkaDataWriter.writeAll"]
    assert part_of([*sink, "org.apache.spark.unsafe.Platform.copyMemory"]) == (
        "rows_and_expressions")
    assert part_of([*sink, "org.apache.spark.sql.kafka010.KafkaRowWriter.sendRow",
                    "org.apache.kafka.clients.producer.KafkaProducer.send"]) == "kafka_write"

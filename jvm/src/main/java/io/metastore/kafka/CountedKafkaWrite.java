package io.metastore.kafka;

import java.util.Iterator;
import java.util.Map;

import org.apache.spark.api.java.function.MapPartitionsFunction;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Encoders;
import org.apache.spark.sql.Row;
import org.apache.spark.util.LongAccumulator;

/**
 * A micro-batch's result written by Spark's Kafka batch writer, as an at-least-once query's
 * batch stage writes it, counting the records it hands the writer: Spark's batch writer reports
 * no count, and the query's progress has none of a {@code foreachBatch} sink. The count is a
 * Spark accumulator, so it holds on a cluster as in local mode, and it is the rows of the
 * micro-batch's result: Spark applies a result task's updates once per partition, and a write
 * that fails counts nothing (the records a failed attempt sent before it failed are in the
 * topic, at least once, but not counted).
 */
public final class CountedKafkaWrite {
    private CountedKafkaWrite() {
    }

    /** Write {@code rows} (Spark's Kafka sink columns) with {@code options}; the records. */
    public static long write(Dataset<Row> rows, Map<String, String> options) {
        LongAccumulator written = rows.sparkSession().sparkContext().longAccumulator();
        rows.mapPartitions(new Counting(written), Encoders.row(rows.schema()))
                .write().format("kafka").options(options).save();
        return written.value();
    }

    private static final class Counting implements MapPartitionsFunction<Row, Row> {
        private final LongAccumulator written;

        Counting(LongAccumulator written) {
            this.written = written;
        }

        @Override
        public Iterator<Row> call(Iterator<Row> rows) {
            return new Iterator<>() {
                @Override
                public boolean hasNext() {
                    return rows.hasNext();
                }

                @Override
                public Row next() {
                    written.add(1);
                    return rows.next();
                }
            };
        }
    }
}

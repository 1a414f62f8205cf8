package io.metastore.state;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;

import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Encoders;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.streaming.OutputMode;
import org.apache.spark.sql.streaming.StatefulProcessor;
import org.apache.spark.sql.streaming.TimeMode;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;

/**
 * How the project's processors run: a stream's rows grouped by one of their columns, each key's
 * rows of a micro-batch handed to a {@link StatefulProcessor} under {@code transformWithState}
 * (its state in the query's checkpoint), which writes rows of {@code output} in append mode.
 */
public final class Keyed {
    private Keyed() {
    }

    /** {@code rows} grouped by {@code keyColumn}, through {@code processor}. */
    public static Dataset<Row> process(Dataset<Row> rows, String keyColumn,
                                       StatefulProcessor<Row, Row, Row> processor,
                                       TimeMode timeMode, StructType output) {
        StructType input = rows.schema();
        int key = input.fieldIndex(keyColumn);
        StructType keySchema = new StructType(new StructField[] {input.apply(key)});
        return rows.groupByKey(new KeyColumn(key), Encoders.row(keySchema))
                .transformWithState(processor, timeMode, OutputMode.Append(),
                                    Encoders.row(output));
    }

    /** A key's rows of a micro-batch, in {@code order}. */
    public static List<Row> inOrder(scala.collection.Iterator<Row> rows, Comparator<Row> order) {
        List<Row> sorted = new ArrayList<>();
        rows.foreach(sorted::add);
        sorted.sort(order);
        return sorted;
    }
}

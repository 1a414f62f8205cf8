package io.metastore.aggregate;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;

import io.metastore.state.Keyed;

import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Encoders;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.expressions.GenericRowWithSchema;
import org.apache.spark.sql.streaming.OutputMode;
import org.apache.spark.sql.streaming.StatefulProcessor;
import org.apache.spark.sql.streaming.TTLConfig;
import org.apache.spark.sql.streaming.TimeMode;
import org.apache.spark.sql.streaming.TimerValues;
import org.apache.spark.sql.streaming.ValueState;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;

/**
 * A table's changelog as an aggregation of the table consumes it: per row key
 * ({@code __MS_RAW_KEY}), the key's latest row is keyed state (in the query's checkpoint), and
 * each micro-batch's records of the key become the changes of its groups, as Kafka Streams'
 * table aggregation sees a new value with the old one it replaces.
 *
 * <p>The input is the table's decoded changelog (a streaming read): its columns and pseudo
 * columns, {@code ROWPARTITION}, {@code ROWOFFSET}, {@code ROWTIME} and {@code __MS_NULL_VALUE}
 * (a tombstone). Per key, in offset order, the output is: the row before the micro-batch, if
 * any, as {@link #LEFT} (it leaves its group), with the time of the first record that replaced
 * it; every record of the micro-batch as {@link #VERSION} (each touches its group); and the
 * key's row after the micro-batch, unless a tombstone deleted it, as {@link #MEMBER} (it is in
 * its group). The output has the input's columns and {@code __MS_CHANGE}, which of these it is.
 */
public final class RowVersions extends StatefulProcessor<Row, Row, Row> {
    private static final long serialVersionUID = 1L;
    static final int MEMBER = 0;
    static final int LEFT = 1;
    static final int VERSION = 2;

    private final StructType input;
    private final StructType output;
    private final int partition;
    private final int offset;
    private final int time;
    private final int deleted;
    private transient ValueState<Row> current;

    private RowVersions(StructType input, StructType output) {
        this.input = input;
        this.output = output;
        this.partition = input.fieldIndex("ROWPARTITION");
        this.offset = input.fieldIndex("ROWOFFSET");
        this.time = input.fieldIndex("ROWTIME");
        this.deleted = input.fieldIndex("__MS_NULL_VALUE");
    }

    /** Register {@code outputView}: the changes of {@code changelogView}'s rows, keyed by row. */
    public static void register(SparkSession session, String changelogView, String outputView) {
        Dataset<Row> changelog = session.table(changelogView).where("__MS_RAW_KEY IS NOT NULL");
        StructType input = changelog.schema();
        StructType output = input.add("__MS_CHANGE", DataTypes.IntegerType, false);
        Keyed.process(changelog, "__MS_RAW_KEY", new RowVersions(input, output), TimeMode.None(),
                      output)
                .createOrReplaceTempView(outputView);
    }

    @Override
    public void init(OutputMode outputMode, TimeMode timeMode) {
        current = getHandle().getValueState("row", Encoders.row(input), TTLConfig.NONE());
    }

    @Override
    public scala.collection.Iterator<Row> handleInputRows(Row key, scala.collection.Iterator<Row> rows,
                                                          TimerValues timerValues) {
        List<Row> records = Keyed.inOrder(rows,
                Comparator.<Row>comparingInt(row -> row.getInt(partition))
                .thenComparingLong(row -> row.getLong(offset)));
        List<Row> out = new ArrayList<>(records.size() + 2);
        if (current.exists()) {
            Row first = records.get(0);
            out.add(change(current.get(), LEFT, first.isNullAt(time) ? null : first.getLong(time)));
        }
        for (Row record : records) {
            out.add(change(record, VERSION, record.get(time)));
        }
        Row last = records.get(records.size() - 1);
        if (!last.isNullAt(deleted) && last.getBoolean(deleted)) {
            current.clear();
        } else {
            Object[] values = new Object[input.length()];
            for (int i = 0; i < values.length; i++) {
                values[i] = last.get(i);
            }
            current.update(new GenericRowWithSchema(values, input));
            out.add(change(last, MEMBER, last.get(time)));
        }
        return scala.jdk.javaapi.CollectionConverters.asScala(out.iterator());
    }

    private Row change(Row row, int kind, Object at) {
        Object[] values = new Object[output.length()];
        for (int i = 0; i < input.length(); i++) {
            values[i] = row.get(i);
        }
        values[time] = at;
        values[input.length()] = kind;
        return new GenericRowWithSchema(values, output);
    }
}

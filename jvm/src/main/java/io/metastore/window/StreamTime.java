package io.metastore.window;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;

import io.metastore.state.Keyed;
import io.metastore.state.Rows;

import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Encoders;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.streaming.OutputMode;
import org.apache.spark.sql.streaming.StatefulProcessor;
import org.apache.spark.sql.streaming.TTLConfig;
import org.apache.spark.sql.streaming.TimeMode;
import org.apache.spark.sql.streaming.TimerValues;
import org.apache.spark.sql.streaming.ValueState;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;

/**
 * Stream time as Kafka Streams counts it for an aggregation: per source partition
 * ({@code ROWPARTITION}), the newest timestamp the aggregation has seen, keyed state in the
 * query's checkpoint.
 *
 * <p>The input is an aggregation's records with their group ({@code __MS_GROUP}, NULL for a
 * record the aggregation does not see: its WHERE rejects it, or it cannot be grouped) and their
 * time in milliseconds ({@code __MS_T}). Per partition, in offset order, each record the
 * aggregation sees moves stream time on to its time if newer and is written with the stream
 * time it met ({@code __MS_STREAM_TIME}); the others are dropped.
 */
public final class StreamTime extends StatefulProcessor<Row, Row, Row> {
    private static final long serialVersionUID = 1L;

    private final StructType output;
    private final int offset;
    private final int time;
    private final int group;
    private transient ValueState<Long> newest;

    private StreamTime(StructType input, StructType output) {
        this.output = output;
        this.offset = input.fieldIndex("ROWOFFSET");
        this.time = input.fieldIndex("__MS_T");
        this.group = input.fieldIndex("__MS_GROUP");
    }

    /** Register {@code outputView}: {@code recordsView}'s grouped records with their stream time. */
    public static void register(SparkSession session, String recordsView, String outputView) {
        Dataset<Row> records = session.table(recordsView);
        StructType input = records.schema();
        StructType output = input.add("__MS_STREAM_TIME", DataTypes.LongType, false);
        Keyed.process(records, "ROWPARTITION", new StreamTime(input, output), TimeMode.None(),
                      output)
                .createOrReplaceTempView(outputView);
    }

    @Override
    public void init(OutputMode outputMode, TimeMode timeMode) {
        newest = getHandle().getValueState("newest", Encoders.LONG(), TTLConfig.NONE());
    }

    @Override
    public scala.collection.Iterator<Row> handleInputRows(Row partition, scala.collection.Iterator<Row> rows,
                                                          TimerValues timerValues) {
        List<Row> records = Keyed.inOrder(rows,
                Comparator.comparingLong(row -> row.getLong(offset)));
        boolean known = newest.exists();
        long streamTime = known ? newest.get() : Long.MIN_VALUE;
        List<Row> out = new ArrayList<>(records.size());
        for (Row record : records) {
            if (record.isNullAt(group) || record.isNullAt(time)) {
                continue;
            }
            streamTime = Math.max(streamTime, record.getLong(time));
            known = true;
            out.add(Rows.appended(record, output, streamTime));
        }
        if (known) {
            newest.update(streamTime);
        }
        return scala.jdk.javaapi.CollectionConverters.asScala(out.iterator());
    }
}

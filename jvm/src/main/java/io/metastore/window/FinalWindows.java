package io.metastore.window;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;

import io.metastore.state.Keyed;
import io.metastore.state.Rows;

import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Encoders;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.streaming.MapState;
import org.apache.spark.sql.streaming.OutputMode;
import org.apache.spark.sql.streaming.StatefulProcessor;
import org.apache.spark.sql.streaming.TTLConfig;
import org.apache.spark.sql.streaming.TimeMode;
import org.apache.spark.sql.streaming.TimerValues;
import org.apache.spark.sql.streaming.ValueState;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;

/**
 * The open windows of an EMIT FINAL time-windowed (TUMBLING, HOPPING) aggregation as keyed
 * state, as Kafka Streams' window aggregation with suppression keeps them: per source partition
 * ({@code ROWPARTITION}), its stream time, the newest window start it stored, the windows not
 * yet closed and the records counted in them, in the query's checkpoint.
 *
 * <p>The input is one row per record and window of its time ({@code __MS_WS} to
 * {@code __MS_WE}, milliseconds), with the record's time ({@code __MS_T}) and whether the
 * aggregation sees it ({@code __MS_SEEN}: its WHERE admits it and it can be grouped). Per
 * partition, in offset order, a record the aggregation sees moves stream time on to its time if
 * newer; it counts in each of its windows whose end is after stream time less the grace period
 * (else it is late there); then each open window whose end stream time less the grace reaches is
 * closed: written, unless the store has expired it (its start before the newest window start
 * stored less the retention), and forgotten. The output is the counted records of each window
 * the micro-batch closes ({@code __MS_SENTINEL} marks the micro-batch's), what the aggregation
 * aggregates and writes.
 */
public final class FinalWindows extends StatefulProcessor<Row, Row, Row> {
    private static final long serialVersionUID = 1L;
    private static final StructType RECORD_WINDOW = new StructType()
            .add("o", DataTypes.LongType, false).add("ws", DataTypes.LongType, false);

    private final StructType input;
    private final StructType output;
    private final int offset;
    private final int time;
    private final int seen;
    private final int start;
    private final int end;
    private final long grace;
    private final long retention;
    private transient ValueState<Long> streamTime;
    private transient ValueState<Long> storeTime;
    private transient MapState<Long, Long> windows;
    private transient MapState<Row, Row> counted;

    private FinalWindows(StructType input, StructType output, long grace, long retention) {
        this.input = input;
        this.output = output;
        this.offset = input.fieldIndex("ROWOFFSET");
        this.time = input.fieldIndex("__MS_T");
        this.seen = input.fieldIndex("__MS_SEEN");
        this.start = input.fieldIndex("__MS_WS");
        this.end = input.fieldIndex("__MS_WE");
        this.grace = grace;
        this.retention = retention;
    }

    /**
     * Register {@code outputView}: the records of the windows {@code windowedView}'s records
     * close, with {@code grace} and {@code retention} (milliseconds).
     */
    public static void register(SparkSession session, String windowedView, String outputView,
                                long grace, long retention) {
        Dataset<Row> windowed = session.table(windowedView);
        StructType input = windowed.schema();
        StructType output = input.add("__MS_SENTINEL", DataTypes.BooleanType, false);
        Keyed.process(windowed, "ROWPARTITION", new FinalWindows(input, output, grace, retention),
                      TimeMode.None(), output)
                .createOrReplaceTempView(outputView);
    }

    @Override
    public void init(OutputMode outputMode, TimeMode timeMode) {
        streamTime = getHandle().getValueState("streamTime", Encoders.LONG(), TTLConfig.NONE());
        storeTime = getHandle().getValueState("storeTime", Encoders.LONG(), TTLConfig.NONE());
        windows = getHandle().getMapState("windows", Encoders.LONG(), Encoders.LONG(),
                                          TTLConfig.NONE());
        counted = getHandle().getMapState("counted", Encoders.row(RECORD_WINDOW),
                                          Encoders.row(input), TTLConfig.NONE());
    }

    @Override
    public scala.collection.Iterator<Row> handleInputRows(Row partition, scala.collection.Iterator<Row> rows,
                                                          TimerValues timerValues) {
        List<Row> batch = Keyed.inOrder(rows,
                Comparator.<Row>comparingLong(row -> row.getLong(offset))
                .thenComparingLong(row -> row.getLong(start)));
        TreeMap<Long, Long> open = new TreeMap<>();  // by start: sizes are equal, so by end too
        scala.collection.Iterator<scala.Tuple2<Long, Long>> stored = windows.iterator();
        while (stored.hasNext()) {
            scala.Tuple2<Long, Long> window = stored.next();
            open.put(window._1(), window._2());
        }
        Set<Long> before = new HashSet<>(open.keySet());
        boolean timed = streamTime.exists();
        long now = timed ? streamTime.get() : Long.MIN_VALUE;
        long newestStart = storeTime.exists() ? storeTime.get() : Long.MIN_VALUE;
        Set<Long> written = new HashSet<>();
        Set<Long> closed = new HashSet<>();
        Map<Row, Row> added = new LinkedHashMap<>();
        int index = 0;
        while (index < batch.size()) {
            long recordOffset = batch.get(index).getLong(offset);
            int next = index;
            while (next < batch.size() && batch.get(next).getLong(offset) == recordOffset) {
                next++;
            }
            Row first = batch.get(index);
            if (first.isNullAt(time) || first.isNullAt(seen) || !first.getBoolean(seen)) {
                index = next;
                continue;
            }
            timed = true;
            now = Math.max(now, first.getLong(time));
            long close = now - grace;
            for (Row row : batch.subList(index, next)) {
                if (row.getLong(end) > close) {
                    long windowStart = row.getLong(start);
                    added.put(RowFactory.create(recordOffset, windowStart), row);
                    open.put(windowStart, row.getLong(end));
                    newestStart = Math.max(newestStart, windowStart);
                }
            }
            while (!open.isEmpty() && open.firstEntry().getValue() <= close) {
                long windowStart = open.pollFirstEntry().getKey();
                closed.add(windowStart);
                if (windowStart >= newestStart - retention) {
                    written.add(windowStart);
                }
            }
            index = next;
        }
        List<Row> out = new ArrayList<>();
        if (!closed.isEmpty()) {
            List<Row> forgotten = new ArrayList<>();
            scala.collection.Iterator<scala.Tuple2<Row, Row>> members = counted.iterator();
            while (members.hasNext()) {
                scala.Tuple2<Row, Row> member = members.next();
                long windowStart = member._1().getLong(1);
                if (closed.contains(windowStart)) {
                    forgotten.add(member._1());
                    if (written.contains(windowStart)) {
                        out.add(Rows.appended(member._2(), output, false));
                    }
                }
            }
            for (Row id : forgotten) {
                counted.removeKey(id);
            }
        }
        for (Map.Entry<Row, Row> entry : added.entrySet()) {
            long windowStart = entry.getKey().getLong(1);
            if (written.contains(windowStart)) {
                out.add(Rows.appended(entry.getValue(), output, true));
            } else if (!closed.contains(windowStart)) {
                counted.updateValue(entry.getKey(), entry.getValue());
            }
        }
        for (Long windowStart : before) {
            if (!open.containsKey(windowStart)) {
                windows.removeKey(windowStart);
            }
        }
        for (Map.Entry<Long, Long> window : open.entrySet()) {
            if (!before.contains(window.getKey())) {
                windows.updateValue(window.getKey(), window.getValue());
            }
        }
        if (timed) {
            streamTime.update(now);
        }
        if (newestStart != Long.MIN_VALUE) {
            storeTime.update(newestStart);
        }
        return scala.jdk.javaapi.CollectionConverters.asScala(out.iterator());
    }

}

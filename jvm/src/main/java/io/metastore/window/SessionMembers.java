package io.metastore.window;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

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
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;

/**
 * The sessions of a SESSION-windowed aggregation as keyed state, as Kafka Streams' session store
 * keeps them: per group ({@code __MS_GROUP}), its live sessions (start to end, milliseconds) and
 * the records in them, in the query's checkpoint.
 *
 * <p>The input is {@link StreamTime}'s output: the records the aggregation sees, each with its
 * time ({@code __MS_T}) and the stream time it met ({@code __MS_STREAM_TIME}). Per group, in
 * partition and offset order, a record first expires the sessions that ended {@code retention}
 * or more before its stream time (with their records), then merges with the sessions it reaches
 * within the gap (both ends inclusive) into one session spanning them and it; the record is
 * dropped as late, changing nothing, when that session would end before its stream time less the
 * grace period and the gap.
 *
 * <p>The output, per micro-batch, is the records of each session that holds one of its records
 * (its new value; {@code __MS_SENTINEL} marks the micro-batch's records) and, with
 * {@code __MS_EARLIER}, the records each session that stood before the micro-batch had, for the
 * sessions it merged or extended (each was written before and is now gone): what the
 * aggregation aggregates again, and the sessions whose records it deletes. Each output row has
 * the input's columns and its session's bounds, {@code __MS_SESSION_START} and
 * {@code __MS_SESSION_END}.
 */
public final class SessionMembers extends StatefulProcessor<Row, Row, Row> {
    private static final long serialVersionUID = 1L;
    private static final StructType RECORD_ID = new StructType()
            .add("p", DataTypes.IntegerType, false).add("o", DataTypes.LongType, false);

    private final StructType input;
    private final StructType output;
    private final int partition;
    private final int offset;
    private final int time;
    private final int streamTime;
    private final long gap;
    private final long grace;
    private final long retention;
    private transient MapState<Long, Long> sessions;
    private transient MapState<Row, Row> records;

    private SessionMembers(StructType input, StructType output, long gap, long grace, long retention) {
        this.input = input;
        this.output = output;
        this.partition = input.fieldIndex("ROWPARTITION");
        this.offset = input.fieldIndex("ROWOFFSET");
        this.time = input.fieldIndex("__MS_T");
        this.streamTime = input.fieldIndex("__MS_STREAM_TIME");
        this.gap = gap;
        this.grace = grace;
        this.retention = retention;
    }

    /**
     * Register {@code outputView}: the changed sessions of {@code timedView}'s records, a window
     * of {@code gap} with {@code grace} and {@code retention} (milliseconds).
     */
    public static void register(SparkSession session, String timedView, String outputView, long gap,
                                long grace, long retention) {
        Dataset<Row> timed = session.table(timedView);
        StructType input = timed.schema();
        StructType output = input.add("__MS_SESSION_START", DataTypes.LongType, false)
                .add("__MS_SESSION_END", DataTypes.LongType, false)
                .add("__MS_SENTINEL", DataTypes.BooleanType, false)
                .add("__MS_EARLIER", DataTypes.BooleanType, false);
        Keyed.process(timed, "__MS_GROUP", new SessionMembers(input, output, gap, grace, retention),
                      TimeMode.None(), output)
                .createOrReplaceTempView(outputView);
    }

    @Override
    public void init(OutputMode outputMode, TimeMode timeMode) {
        sessions = getHandle().getMapState("sessions", Encoders.LONG(), Encoders.LONG(),
                                           TTLConfig.NONE());
        records = getHandle().getMapState("records", Encoders.row(RECORD_ID), Encoders.row(input),
                                          TTLConfig.NONE());
    }

    @Override
    public scala.collection.Iterator<Row> handleInputRows(Row group, scala.collection.Iterator<Row> rows,
                                                          TimerValues timerValues) {
        List<Row> batch = Keyed.inOrder(rows,
                Comparator.<Row>comparingInt(row -> row.getInt(partition))
                .thenComparingLong(row -> row.getLong(offset)));
        List<long[]> before = new ArrayList<>();
        scala.collection.Iterator<scala.Tuple2<Long, Long>> stored = sessions.iterator();
        while (stored.hasNext()) {
            scala.Tuple2<Long, Long> entry = stored.next();
            before.add(new long[] {entry._1(), entry._2()});
        }
        List<long[]> live = new ArrayList<>(before);
        List<long[]> gone = new ArrayList<>();
        List<long[]> expired = new ArrayList<>();
        Map<Row, Row> added = new LinkedHashMap<>();
        for (Row record : batch) {
            long at = record.getLong(time);
            long now = record.getLong(streamTime);
            live.removeIf(session -> session[1] <= now - retention && expired.add(session));
            long first = at;
            long last = at;
            List<long[]> reached = new ArrayList<>();
            for (long[] session : live) {
                if (session[1] >= at - gap && session[0] <= at + gap) {
                    reached.add(session);
                    first = Math.min(first, session[0]);
                    last = Math.max(last, session[1]);
                }
            }
            if (last < now - grace - gap) {
                continue;  // late: its session is closed
            }
            for (long[] session : reached) {
                live.remove(session);
                if (before.contains(session)) {
                    gone.add(session);
                }
            }
            live.add(new long[] {first, last});
            added.put(RowFactory.create(record.getInt(partition), record.getLong(offset)), record);
        }
        // a session the micro-batch changed was written then, though a later record of it
        // expired the session: Kafka Streams writes at each record
        List<long[]> touched = new ArrayList<>();
        for (Row record : added.values()) {
            long[] session = session(live, expired, record.getLong(time));
            if (session != null && !touched.contains(session)) {
                touched.add(session);
            }
        }
        List<Row> out = new ArrayList<>();
        List<Row> dropped = new ArrayList<>();
        scala.collection.Iterator<scala.Tuple2<Row, Row>> members = records.iterator();
        while (members.hasNext()) {
            scala.Tuple2<Row, Row> member = members.next();
            if (added.containsKey(member._1())) {
                continue;
            }
            long at = member._2().getLong(time);
            long[] session = session(live, expired, at);
            if (session == null || !live.contains(session)) {
                dropped.add(member._1());
            }
            if (session != null && touched.contains(session)) {
                out.add(member(member._2(), session, false, false));
            }
            long[] earlier = containing(gone, at);
            if (earlier != null) {
                out.add(member(member._2(), earlier, false, true));
            }
        }
        for (Row id : dropped) {
            records.removeKey(id);
        }
        for (Map.Entry<Row, Row> entry : added.entrySet()) {
            long[] session = session(live, expired, entry.getValue().getLong(time));
            if (session == null) {
                continue;
            }
            if (live.contains(session)) {
                records.updateValue(entry.getKey(), entry.getValue());
            }
            out.add(member(entry.getValue(), session, true, false));
        }
        for (long[] session : before) {
            if (!live.contains(session)) {
                sessions.removeKey(session[0]);
            }
        }
        for (long[] session : live) {
            if (!before.contains(session)) {
                sessions.updateValue(session[0], session[1]);
            }
        }
        return scala.jdk.javaapi.CollectionConverters.asScala(out.iterator());
    }

    /** The live session holding a record at {@code at}, else the expired one, else null. */
    private static long[] session(List<long[]> live, List<long[]> expired, long at) {
        long[] session = containing(live, at);
        return session != null ? session : containing(expired, at);
    }

    private static long[] containing(List<long[]> candidates, long at) {
        for (long[] session : candidates) {
            if (session[0] <= at && at <= session[1]) {
                return session;
            }
        }
        return null;
    }

    private Row member(Row record, long[] session, boolean sentinel, boolean earlier) {
        return Rows.appended(record, output, session[0], session[1], sentinel, earlier);
    }
}

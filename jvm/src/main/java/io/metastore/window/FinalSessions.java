package io.metastore.window;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;

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
 * The sessions of an EMIT FINAL SESSION-windowed aggregation as keyed state, as Kafka Streams'
 * session aggregation with final results keeps them: per source partition
 * ({@code ROWPARTITION}), its stream time, the close time it last wrote sessions up to, each
 * group's live sessions (start to end, milliseconds) and the records in them, in the query's
 * checkpoint. A session closes by stream time, which any group's records move, so the state is
 * keyed by partition, as {@link FinalWindows}'.
 *
 * <p>The input is the aggregation's records, each with its group ({@code __MS_GROUP}, a string
 * naming it; NULL for a record the aggregation does not see) and its time ({@code __MS_T}). Per
 * partition, in offset order, a record the aggregation sees moves stream time on to its time if
 * newer and merges with the live sessions of its group it reaches within the gap (both ends
 * inclusive) into one session spanning them and it, unless that session would end before stream
 * time less the grace period and the gap (its close): the record is then late and dropped. Then,
 * once the close passes the one last written up to, each session ending at or after that one
 * (and at or after 0) and before the new close is written with the records it holds then.
 * Lastly sessions that ended {@code retention} or more before stream time expire with their
 * records, once written (no later record reaches them). A written session stays in the store
 * until it expires, so a later record may still merge it into a session written at its own
 * close, as Kafka Streams writes both.
 *
 * <p>The output, per micro-batch, is the records of each session it closed, with the session's
 * bounds ({@code __MS_SESSION_START}, {@code __MS_SESSION_END}) and {@code __MS_SENTINEL}
 * marking the micro-batch's own records: what the aggregation aggregates and writes.
 */
public final class FinalSessions extends StatefulProcessor<Row, Row, Row> {
    private static final long serialVersionUID = 1L;
    private static final StructType SESSION_ID = new StructType()
            .add("g", DataTypes.StringType, false).add("s", DataTypes.LongType, false);

    private final StructType input;
    private final StructType output;
    private final int offset;
    private final int time;
    private final int group;
    private final long gap;
    private final long grace;
    private final long retention;
    private transient ValueState<Long> streamTime;
    private transient ValueState<Long> closedUpTo;
    private transient MapState<Row, Long> sessions;
    private transient MapState<Long, Row> records;

    /** A session of one group; sessions are told apart by {@code id} in a micro-batch. */
    private static final class Session {
        final String group;
        final long start;
        final long end;
        final long id;

        Session(String group, long start, long end, long id) {
            this.group = group;
            this.start = start;
            this.end = end;
            this.id = id;
        }

        boolean holds(long at) {
            return start <= at && at <= end;
        }
    }

    /** A session written at the record of {@code offset}: the records it held then. */
    private record Written(Session session, long offset) {
    }

    private FinalSessions(StructType input, StructType output, long gap, long grace,
                          long retention) {
        this.input = input;
        this.output = output;
        this.offset = input.fieldIndex("ROWOFFSET");
        this.time = input.fieldIndex("__MS_T");
        this.group = input.fieldIndex("__MS_GROUP");
        this.gap = gap;
        this.grace = grace;
        this.retention = retention;
    }

    /**
     * Register {@code outputView}: the records of the sessions {@code groupedView}'s records
     * close, a window of {@code gap} with {@code grace} and {@code retention} (milliseconds).
     */
    public static void register(SparkSession session, String groupedView, String outputView,
                                long gap, long grace, long retention) {
        Dataset<Row> grouped = session.table(groupedView);
        StructType input = grouped.schema();
        StructType output = input.add("__MS_SESSION_START", DataTypes.LongType, false)
                .add("__MS_SESSION_END", DataTypes.LongType, false)
                .add("__MS_SENTINEL", DataTypes.BooleanType, false);
        Keyed.process(grouped, "ROWPARTITION",
                      new FinalSessions(input, output, gap, grace, retention), TimeMode.None(),
                      output)
                .createOrReplaceTempView(outputView);
    }

    @Override
    public void init(OutputMode outputMode, TimeMode timeMode) {
        streamTime = getHandle().getValueState("streamTime", Encoders.LONG(), TTLConfig.NONE());
        closedUpTo = getHandle().getValueState("closedUpTo", Encoders.LONG(), TTLConfig.NONE());
        sessions = getHandle().getMapState("sessions", Encoders.row(SESSION_ID), Encoders.LONG(),
                                           TTLConfig.NONE());
        records = getHandle().getMapState("records", Encoders.LONG(), Encoders.row(input),
                                          TTLConfig.NONE());
    }

    @Override
    public scala.collection.Iterator<Row> handleInputRows(Row partition,
                                                          scala.collection.Iterator<Row> rows,
                                                          TimerValues timerValues) {
        List<Row> batch = Keyed.inOrder(rows, Comparator.comparingLong(row -> row.getLong(offset)));
        Map<String, List<Session>> live = new HashMap<>();
        TreeSet<Session> byEnd = new TreeSet<>(Comparator.<Session>comparingLong(s -> s.end)
                                               .thenComparingLong(s -> s.id));
        long ids = 0;
        scala.collection.Iterator<scala.Tuple2<Row, Long>> stored = sessions.iterator();
        while (stored.hasNext()) {
            scala.Tuple2<Row, Long> entry = stored.next();
            Session session = new Session(entry._1().getString(0), entry._1().getLong(1),
                                          entry._2(), ids++);
            live.computeIfAbsent(session.group, g -> new ArrayList<>()).add(session);
            byEnd.add(session);
        }
        Set<Session> before = new HashSet<>(byEnd);
        boolean timed = streamTime.exists();
        long now = timed ? streamTime.get() : Long.MIN_VALUE;
        long closed = closedUpTo.exists() ? closedUpTo.get() : 0L;
        boolean expired = false;
        List<Written> written = new ArrayList<>();
        Map<Long, Row> added = new LinkedHashMap<>();
        for (Row record : batch) {
            if (record.isNullAt(group) || record.isNullAt(time)) {
                continue;
            }
            long at = record.getLong(time);
            timed = true;
            now = Math.max(now, at);
            long close = now - grace - gap;
            if (merge(live, byEnd, record.getString(group), at, now, close, ids++)) {
                added.put(record.getLong(offset), record);
            }
            if (close > closed) {
                Session from = new Session(null, 0, Math.max(0L, closed), Long.MIN_VALUE);
                Session to = new Session(null, 0, close, Long.MIN_VALUE);
                for (Session session : byEnd.subSet(from, true, to, false)) {
                    written.add(new Written(session, record.getLong(offset)));
                }
                closed = close;
            }
            // a session expires once written: one ending at the close it reached waits for it
            while (!byEnd.isEmpty() && byEnd.first().end <= now - retention
                    && byEnd.first().end < closed) {
                Session gone = byEnd.pollFirst();
                live.get(gone.group).remove(gone);
                expired = true;
            }
        }
        List<Row> out = new ArrayList<>();
        Map<String, List<Written>> writtenByGroup = new HashMap<>();
        for (Written w : written) {
            writtenByGroup.computeIfAbsent(w.session().group, g -> new ArrayList<>()).add(w);
        }
        if (!written.isEmpty() || expired) {
            List<Long> dropped = new ArrayList<>();
            scala.collection.Iterator<scala.Tuple2<Long, Row>> members = records.iterator();
            while (members.hasNext()) {
                scala.Tuple2<Long, Row> member = members.next();
                write(member._2(), member._1(), false, writtenByGroup, out);
                if (holder(live, member._2()) == null) {
                    dropped.add(member._1());
                }
            }
            for (Long id : dropped) {
                records.removeKey(id);
            }
        }
        for (Map.Entry<Long, Row> entry : added.entrySet()) {
            write(entry.getValue(), entry.getKey(), true, writtenByGroup, out);
            if (holder(live, entry.getValue()) != null) {
                records.updateValue(entry.getKey(), entry.getValue());
            }
        }
        for (Session session : before) {
            if (!byEnd.contains(session)) {
                sessions.removeKey(RowFactory.create(session.group, session.start));
            }
        }
        for (Session session : byEnd) {
            if (!before.contains(session)) {
                sessions.updateValue(RowFactory.create(session.group, session.start),
                                     session.end);
            }
        }
        if (timed) {
            streamTime.update(now);
        }
        if (closed != 0L) {
            closedUpTo.update(closed);
        }
        return scala.jdk.javaapi.CollectionConverters.asScala(out.iterator());
    }

    /**
     * Merge a record of {@code group} at {@code at} with the live sessions it reaches (those not
     * expired at {@code now}) into one session, in {@code live} and {@code byEnd}; false, and
     * nothing changed, when that session would end before {@code close}: the record is late.
     */
    private boolean merge(Map<String, List<Session>> live, TreeSet<Session> byEnd, String group,
                          long at, long now, long close, long id) {
        List<Session> mine = live.computeIfAbsent(group, g -> new ArrayList<>());
        long first = at;
        long last = at;
        List<Session> reached = new ArrayList<>();
        for (Session session : mine) {
            if (session.end > now - retention && session.end >= at - gap
                    && session.start <= at + gap) {
                reached.add(session);
                first = Math.min(first, session.start);
                last = Math.max(last, session.end);
            }
        }
        if (last < close) {
            return false;
        }
        mine.removeAll(reached);
        reached.forEach(byEnd::remove);
        Session session = new Session(group, first, last, id);
        mine.add(session);
        byEnd.add(session);
        return true;
    }

    /** The live session holding {@code record}, else null. */
    private Session holder(Map<String, List<Session>> live, Row record) {
        long at = record.getLong(time);
        for (Session session : live.getOrDefault(record.getString(group), List.of())) {
            if (session.holds(at)) {
                return session;
            }
        }
        return null;
    }

    /** Write {@code record} in each session written that held it then. */
    private void write(Row record, long recordOffset, boolean sentinel,
                       Map<String, List<Written>> writtenByGroup, List<Row> out) {
        long at = record.getLong(time);
        for (Written w : writtenByGroup.getOrDefault(record.getString(group), List.of())) {
            if (w.session().holds(at) && recordOffset <= w.offset()) {
                out.add(Rows.appended(record, output, w.session().start, w.session().end,
                                      sentinel));
            }
        }
    }
}

package io.metastore.window;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.HashSet;
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
 * newer; the sessions written before that ended {@code retention} or more before stream time
 * expire with their records; the record merges with the live sessions of its group it reaches
 * within the gap (both ends inclusive) into one session spanning them and it, unless that
 * session would end before stream time less the grace period and the gap (its close): the
 * record is then late and dropped. Then, once the close passes the one last written up to, each
 * session ending at or after that one (and at or after 0) and before the new close is written
 * with the records it holds then. A written session stays in the store until it expires, so a
 * later record may still merge it into a session written at its own close, as Kafka Streams
 * writes both; a group's live sessions never overlap, and each record is in one of them.
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

    /** A session of one group; sessions are told apart by {@code id} within a micro-batch. */
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
    }

    /** A record of a live session: the session it is in, and whether it is the batch's. */
    private static final class Member {
        final long recordOffset;
        final Row record;
        final boolean sentinel;
        Session session;

        Member(long recordOffset, Row record, boolean sentinel, Session session) {
            this.recordOffset = recordOffset;
            this.record = record;
            this.sentinel = sentinel;
            this.session = session;
        }
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
        Partition state = new Partition();
        for (Row record : Keyed.inOrder(rows, Comparator.comparingLong(r -> r.getLong(offset)))) {
            state.take(record);
        }
        state.save();
        return scala.jdk.javaapi.CollectionConverters.asScala(state.out.iterator());
    }

    /** One partition's state for a micro-batch: read at its start, saved at its end. */
    private final class Partition {
        final Map<String, List<Session>> live = new HashMap<>();
        final TreeSet<Session> byEnd = new TreeSet<>(
                Comparator.<Session>comparingLong(s -> s.end).thenComparingLong(s -> s.id));
        final Map<String, List<Member>> members = new HashMap<>();
        final Set<Session> before;
        final List<Long> expiredRecords = new ArrayList<>();
        final List<Row> out = new ArrayList<>();
        long now = streamTime.exists() ? streamTime.get() : Long.MIN_VALUE;  // MIN: none yet
        long closed = closedUpTo.exists() ? closedUpTo.get() : 0L;
        long ids;

        Partition() {
            scala.collection.Iterator<scala.Tuple2<Row, Long>> stored = sessions.iterator();
            while (stored.hasNext()) {
                scala.Tuple2<Row, Long> entry = stored.next();
                add(new Session(entry._1().getString(0), entry._1().getLong(1), entry._2(),
                                ids++));
            }
            before = new HashSet<>(byEnd);
            scala.collection.Iterator<scala.Tuple2<Long, Row>> kept = records.iterator();
            while (kept.hasNext()) {
                scala.Tuple2<Long, Row> entry = kept.next();
                Row record = entry._2();
                Session holder = holder(record.getString(group), record.getLong(time));
                if (holder == null) {
                    expiredRecords.add(entry._1());
                } else {
                    membersOf(holder.group).add(new Member(entry._1(), record, false, holder));
                }
            }
        }

        /** A record, in offset order. */
        void take(Row record) {
            if (record.isNullAt(group) || record.isNullAt(time)) {
                return;
            }
            long at = record.getLong(time);
            now = Math.max(now, at);
            expire();
            long close = now - grace - gap;
            Session merged = merge(record.getString(group), at, close);
            if (merged != null) {
                membersOf(merged.group).add(new Member(record.getLong(offset), record, true,
                                                       merged));
            }
            if (close > closed) {
                Session from = new Session(null, 0, Math.max(0L, closed), Long.MIN_VALUE);
                Session to = new Session(null, 0, close, Long.MIN_VALUE);
                for (Session session : byEnd.subSet(from, true, to, false)) {
                    write(session);
                }
                closed = close;
            }
        }

        /** Forget the written sessions that ended {@code retention} or more before now. */
        void expire() {
            while (!byEnd.isEmpty() && byEnd.first().end <= now - retention
                    && byEnd.first().end < closed) {
                Session gone = byEnd.pollFirst();
                live.get(gone.group).remove(gone);
                membersOf(gone.group).removeIf(member -> {
                    if (member.session != gone) {
                        return false;
                    }
                    if (!member.sentinel) {
                        expiredRecords.add(member.recordOffset);
                    }
                    return true;
                });
            }
        }

        /**
         * The session a record of {@code group} at {@code at} makes with the live sessions it
         * reaches, which it replaces (their records move to it); null, and nothing changed,
         * when that session would end before {@code close}: the record is late.
         */
        Session merge(String recordGroup, long at, long close) {
            List<Session> reached = new ArrayList<>();
            long first = at;
            long last = at;
            for (Session session : live.getOrDefault(recordGroup, List.of())) {
                if (session.end >= at - gap && session.start <= at + gap) {
                    reached.add(session);
                    first = Math.min(first, session.start);
                    last = Math.max(last, session.end);
                }
            }
            if (last < close) {
                return null;
            }
            if (!reached.isEmpty()) {
                live.get(recordGroup).removeAll(reached);
                reached.forEach(byEnd::remove);
            }
            Session merged = add(new Session(recordGroup, first, last, ids++));
            for (Member member : membersOf(recordGroup)) {
                if (reached.contains(member.session)) {
                    member.session = merged;
                }
            }
            return merged;
        }

        /** Write {@code session} with the records it holds now. */
        void write(Session session) {
            for (Member member : membersOf(session.group)) {
                if (member.session == session) {
                    out.add(Rows.appended(member.record, output, session.start, session.end,
                                          member.sentinel));
                }
            }
        }

        /** Save what the micro-batch changed. */
        void save() {
            expire();
            for (Long expired : expiredRecords) {
                records.removeKey(expired);
            }
            for (List<Member> groupMembers : members.values()) {
                for (Member member : groupMembers) {
                    if (member.sentinel) {
                        records.updateValue(member.recordOffset, member.record);
                    }
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
            if (now != Long.MIN_VALUE) {
                streamTime.update(now);
            }
            closedUpTo.update(closed);
        }

        Session add(Session session) {
            live.computeIfAbsent(session.group, g -> new ArrayList<>()).add(session);
            byEnd.add(session);
            return session;
        }

        Session holder(String recordGroup, long at) {
            for (Session session : live.getOrDefault(recordGroup, List.of())) {
                if (session.start <= at && at <= session.end) {
                    return session;
                }
            }
            return null;
        }

        List<Member> membersOf(String memberGroup) {
            return members.computeIfAbsent(memberGroup, g -> new ArrayList<>());
        }
    }
}

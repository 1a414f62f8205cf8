package io.metastore.join;

import java.util.ArrayList;
import java.util.List;

import io.metastore.state.Keyed;
import io.metastore.state.Rows;

import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Encoders;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.streaming.ExpiredTimerInfo;
import org.apache.spark.sql.streaming.ListState;
import org.apache.spark.sql.streaming.OutputMode;
import org.apache.spark.sql.streaming.StatefulProcessor;
import org.apache.spark.sql.streaming.TTLConfig;
import org.apache.spark.sql.streaming.TimeMode;
import org.apache.spark.sql.streaming.TimerValues;
import org.apache.spark.sql.types.Metadata;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;

/**
 * The outer side of a stream-stream join without GRACE PERIOD as ksqlDB writes it: a record no
 * earlier record of the other stream matches is written at once. Keyed by the join key
 * ({@code __MS_JOINKEY}), the state is the times of the other stream's records (in the query's
 * checkpoint), kept while a record of the key could still reach them.
 *
 * <p>The input is both streams' records: the outer stream's ({@code __MS_STREAMED} true) with
 * the whole record ({@code __MS_ROW}), the other's with only their key and time
 * ({@code __MS_T}, milliseconds). Per key, a micro-batch first adds the other stream's times,
 * then writes each outer record that no other record matches within
 * {@code [time - lookback, time]} (a record of the same time counting as earlier, since the
 * records do not say which came first). The output is those records' {@code __MS_ROW}.
 *
 * <p>A key's times are kept {@code retention} past the newest record of the key: later ones are
 * dropped when the key comes again, and a key that does not come again is forgotten by an
 * event-time timer, once the query's watermark (the streams' newest time less the join's
 * grace) passes that point.
 */
public final class UnmatchedRecords extends StatefulProcessor<Row, Row, Row> {
    private static final long serialVersionUID = 1L;

    private final StructType output;
    private final int streamed;
    private final int time;
    private final int row;
    private final long lookback;
    private final long retention;
    private transient ListState<Long> times;

    private UnmatchedRecords(StructType input, StructType output, long lookback, long retention) {
        this.output = output;
        this.streamed = input.fieldIndex("__MS_STREAMED");
        this.time = input.fieldIndex("__MS_T");
        this.row = input.fieldIndex("__MS_ROW");
        this.lookback = lookback;
        this.retention = retention;
    }

    /**
     * Register {@code outputView}: the records of {@code recordsView}'s outer stream that find
     * no match, an other record within {@code lookback} before them; the other stream's times
     * are kept {@code retention} after the newest time of their key (milliseconds). And
     * {@code outputView + "_other"}: no rows, with the columns of the other stream's
     * {@code otherView} (what pads an unmatched record, in batch).
     */
    public static void register(SparkSession session, String recordsView, String otherView,
                                String outputView, long lookback, long retention) {
        StructField[] otherFields = session.table(otherView).schema().fields();
        StructField[] plain = new StructField[otherFields.length];
        for (int i = 0; i < plain.length; i++) {  // a streaming view's watermark stays there
            plain[i] = new StructField(otherFields[i].name(), otherFields[i].dataType(),
                                       otherFields[i].nullable(), Metadata.empty());
        }
        session.createDataFrame(new ArrayList<Row>(), new StructType(plain))
                .createOrReplaceTempView(outputView + "_other");
        Dataset<Row> records = session.table(recordsView);
        StructType input = records.schema();
        StructType output = (StructType) input.apply("__MS_ROW").dataType();
        Keyed.process(records, "__MS_JOINKEY",
                      new UnmatchedRecords(input, output, lookback, retention),
                      TimeMode.EventTime(), output)
                .createOrReplaceTempView(outputView);
    }

    @Override
    public void init(OutputMode outputMode, TimeMode timeMode) {
        times = getHandle().getListState("times", Encoders.LONG(), TTLConfig.NONE());
    }

    @Override
    public scala.collection.Iterator<Row> handleInputRows(Row key, scala.collection.Iterator<Row> rows,
                                                          TimerValues timerValues) {
        List<Long> known = new ArrayList<>();
        scala.collection.Iterator<Long> stored = times.get();
        while (stored.hasNext()) {
            known.add(stored.next());
        }
        int before = known.size();
        List<Row> outer = new ArrayList<>();
        long newest = Long.MIN_VALUE;
        while (rows.hasNext()) {
            Row record = rows.next();
            if (record.isNullAt(time)) {
                continue;
            }
            long at = record.getLong(time);
            newest = Math.max(newest, at);
            if (record.getBoolean(streamed)) {
                outer.add(record);
            } else {
                known.add(at);
            }
        }
        List<Row> out = new ArrayList<>();
        boolean keyed = !key.isNullAt(0);  // a NULL key matches nothing
        for (Row record : outer) {
            long at = record.getLong(time);
            boolean matched = false;
            for (long other : known) {
                if (keyed && other <= at && other >= at - lookback) {
                    matched = true;
                    break;
                }
            }
            if (!matched && !record.isNullAt(row)) {
                out.add(Rows.appended(record.getStruct(row), output));
            }
        }
        if (!keyed) {
            return scala.jdk.javaapi.CollectionConverters.asScala(out.iterator());
        }
        if (newest != Long.MIN_VALUE) {
            forgetAfter(newest + retention);
        }
        long horizon = newest == Long.MIN_VALUE ? Long.MIN_VALUE : newest - retention;
        List<Long> kept = new ArrayList<>(known.size());
        for (long other : known) {
            if (other >= horizon) {
                kept.add(other);
            }
        }
        if (kept.size() != before || before != known.size()) {
            if (kept.isEmpty()) {
                times.clear();
            } else {
                times.put(kept.toArray(new Long[0]));
            }
        }
        return scala.jdk.javaapi.CollectionConverters.asScala(out.iterator());
    }

    @Override
    public scala.collection.Iterator<Row> handleExpiredTimer(Row key, TimerValues timerValues,
                                                             ExpiredTimerInfo expiredTimerInfo) {
        times.clear();
        return scala.jdk.javaapi.CollectionConverters.asScala(new ArrayList<Row>().iterator());
    }

    /**
     * One timer per key, at {@code at} or the later time a record of the key asked for before:
     * the key's times are gone once the watermark passes it.
     */
    private void forgetAfter(long at) {
        List<Long> registered = new ArrayList<>();
        getHandle().listTimers().foreach(timer -> registered.add((Long) timer));
        long latest = at;
        for (long timer : registered) {
            latest = Math.max(latest, timer);
        }
        for (long timer : registered) {
            if (timer != latest) {
                getHandle().deleteTimer(timer);
            }
        }
        if (!registered.contains(latest)) {
            getHandle().registerTimer(latest);
        }
    }
}

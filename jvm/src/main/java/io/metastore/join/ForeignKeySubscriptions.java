package io.metastore.join;

import java.util.ArrayList;
import java.util.List;
import java.util.Objects;

import org.apache.spark.sql.Encoders;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.catalyst.expressions.GenericRowWithSchema;
import org.apache.spark.sql.streaming.OutputMode;
import org.apache.spark.sql.streaming.StatefulProcessor;
import org.apache.spark.sql.streaming.TTLConfig;
import org.apache.spark.sql.streaming.TimeMode;
import org.apache.spark.sql.streaming.TimerValues;
import org.apache.spark.sql.streaming.ValueState;
import org.apache.spark.sql.types.StructType;

/**
 * The left side of a foreign-key join of tables as keyed state: per left key ({@code __MS_JK}),
 * the left table's latest row and its foreign key ({@code __MS_FK}), as Kafka Streams' left
 * side of a foreign-key join keeps them and subscribes each row to its right row.
 *
 * <p>Per key, a micro-batch's changelog records are applied in offset order; then the key's
 * change is routed ({@code __MS_ROUTE}, a struct of a foreign key and a left key) to where its
 * result is made: an {@link #UNSUBSCRIBE} to the old foreign key when the row left it, a
 * {@link #SUBSCRIBE} with the row to its foreign key, or, for a deleted row or one without a
 * foreign key, the row itself as a {@link #RESULT} routed by its own key (the join has no right
 * row for it). {@code __MS_AT} is the newest time of the key's records in the micro-batch.
 */
final class ForeignKeySubscriptions extends StatefulProcessor<Row, Row, Row> {
    private static final long serialVersionUID = 1L;
    static final int SUBSCRIBE = 0;
    static final int UNSUBSCRIBE = 1;
    static final int RESULT = 2;

    private final StructType output;
    private final TableColumns left;
    private final int deleted;
    private final int foreignKey;
    private final int time;
    private final int operation;
    private final int route;
    private final Arrival arrival;
    private transient ValueState<Row> current;

    ForeignKeySubscriptions(StructType input, StructType output, List<String> leftColumns) {
        this.output = output;
        List<String> kept = new ArrayList<>(leftColumns);
        kept.add("__MS_FK");
        this.left = new TableColumns(input, kept);
        this.deleted = input.fieldIndex("__MS_DELETED");
        this.foreignKey = input.fieldIndex("__MS_FK");
        this.time = input.fieldIndex("__MS_AT");
        this.operation = output.fieldIndex("__MS_OP");
        this.route = output.fieldIndex("__MS_ROUTE");
        this.arrival = new Arrival(input.fieldIndex("__MS_SIDE"), input.fieldIndex("__MS_AT_P"),
                                   input.fieldIndex("__MS_AT_O"), time);
    }

    @Override
    public void init(OutputMode outputMode, TimeMode timeMode) {
        current = getHandle().getValueState("left_row", Encoders.row(left.schema), TTLConfig.NONE());
    }

    @Override
    public scala.collection.Iterator<Row> handleInputRows(Row key, scala.collection.Iterator<Row> rows,
                                                          TimerValues timerValues) {
        Row before = current.exists() ? current.get() : null;
        Row after = before;
        Long newest = null;
        Row last = null;
        for (Row change : arrival.order(rows)) {
            last = change;
            boolean tombstone = !change.isNullAt(deleted) && change.getBoolean(deleted);
            after = tombstone ? null : left.of(change);
            if (!change.isNullAt(time)) {
                newest = newest == null ? change.getLong(time) : Math.max(newest, change.getLong(time));
            }
        }
        Object oldForeignKey = before == null ? null : before.get(before.length() - 1);
        Object newForeignKey = after == null ? null : after.get(after.length() - 1);
        List<Row> out = new ArrayList<>(2);
        if (oldForeignKey != null && !Objects.deepEquals(oldForeignKey, newForeignKey)) {
            out.add(routed(last, null, newest, UNSUBSCRIBE, RowFactory.create(oldForeignKey, null)));
        }
        if (newForeignKey != null) {
            out.add(routed(last, after, newest, SUBSCRIBE, RowFactory.create(newForeignKey, null)));
        } else {
            out.add(routed(last, after, newest, RESULT, RowFactory.create(null, key.get(0))));
        }
        if (after == null) {
            current.clear();
        } else {
            current.update(after);
        }
        return scala.jdk.javaapi.CollectionConverters.asScala(out.iterator());
    }

    /** The key's change: its last record's order columns, the row (or none) and its route. */
    private Row routed(Row last, Row row, Long at, int kind, Row to) {
        Object[] values = new Object[output.length()];
        for (int i = 0; i < last.length(); i++) {
            values[i] = last.get(i);
        }
        left.fill(values, row);
        values[deleted] = row == null;
        values[time] = at;
        values[operation] = kind;
        values[route] = to;
        return new GenericRowWithSchema(values, output);
    }
}

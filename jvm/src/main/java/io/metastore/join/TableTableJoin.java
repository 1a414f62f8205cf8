package io.metastore.join;

import java.util.ArrayList;
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
import org.apache.spark.sql.types.StructType;

/**
 * A join of tables on their primary keys whose sides are keyed state: each table's latest row
 * per key, kept in the query's state store (so in its checkpoint), updated by the table's
 * changelog and cleared by its tombstones.
 *
 * <p>The input is the union of the tables' changelogs: each record with its table's index
 * ({@code __MS_SIDE}), its key ({@code __MS_JK}), its time, partition and offset
 * ({@code __MS_AT}, {@code __MS_AT_P}, {@code __MS_AT_O}), whether it is a tombstone
 * ({@code __MS_DELETED}) and its table's columns (under names of their own, NULL in the other
 * tables' records). Per key, a micro-batch's records are applied in turn (each table's in
 * offset order, {@link Arrival}), then one row is emitted for the key: every table's current
 * row in its columns (NULLs where the table has none), {@code __MS_AT} the newest time of the
 * micro-batch's records of the key. The output has the input's columns but {@code __MS_SIDE},
 * {@code __MS_DELETED}, {@code __MS_AT_P} and {@code __MS_AT_O}.
 */
public final class TableTableJoin extends StatefulProcessor<Row, Row, Row> {
    private static final long serialVersionUID = 1L;

    private final StructType schema;
    private final TableColumns[] tables;
    private final int side;
    private final int deleted;
    private final int time;
    private final int partition;
    private final int offset;
    private final int joinKey;
    private transient List<ValueState<Row>> rows;

    private TableTableJoin(StructType schema, List<List<String>> tableColumns) {
        this.schema = schema;
        this.tables = tableColumns.stream().map(columns -> new TableColumns(schema, columns))
                .toArray(TableColumns[]::new);
        this.side = schema.fieldIndex("__MS_SIDE");
        this.deleted = schema.fieldIndex("__MS_DELETED");
        this.time = schema.fieldIndex("__MS_AT");
        this.partition = schema.fieldIndex("__MS_AT_P");
        this.offset = schema.fieldIndex("__MS_AT_O");
        this.joinKey = schema.fieldIndex("__MS_JK");
    }

    /**
     * Register {@code outputView}: the join, keyed by {@code __MS_JK}, of the changelogs in
     * {@code tableViews} (unioned by column name); {@code tableColumns} are each table's columns.
     */
    public static void register(SparkSession session, List<String> tableViews, String outputView,
                                List<List<String>> tableColumns) {
        Dataset<Row> input = session.table(tableViews.get(0));
        for (String view : tableViews.subList(1, tableViews.size())) {
            input = input.unionByName(session.table(view), true);
        }
        StructType schema = input.schema();
        Keyed.process(input, "__MS_JK", new TableTableJoin(schema, tableColumns),
                      TimeMode.None(), schema)
                .drop("__MS_SIDE", "__MS_DELETED", "__MS_AT_P", "__MS_AT_O")
                .createOrReplaceTempView(outputView);
    }

    @Override
    public void init(OutputMode outputMode, TimeMode timeMode) {
        rows = new ArrayList<>();
        for (int table = 0; table < tables.length; table++) {
            rows.add(getHandle().getValueState("table_" + table, Encoders.row(tables[table].schema),
                                               TTLConfig.NONE()));
        }
    }

    @Override
    public scala.collection.Iterator<Row> handleInputRows(Row key, scala.collection.Iterator<Row> changes,
                                                          TimerValues timerValues) {
        Row[] current = new Row[rows.size()];
        boolean[] changed = new boolean[rows.size()];
        for (int table = 0; table < current.length; table++) {
            current[table] = rows.get(table).exists() ? rows.get(table).get() : null;
        }
        Long newest = null;
        for (Row change : new Arrival(side, partition, offset, time).order(changes)) {
            int table = change.getInt(side);
            changed[table] = true;
            boolean tombstone = !change.isNullAt(deleted) && change.getBoolean(deleted);
            current[table] = tombstone ? null : tables[table].of(change);
            if (!change.isNullAt(time)) {
                newest = newest == null ? change.getLong(time) : Math.max(newest, change.getLong(time));
            }
        }
        Object[] values = new Object[schema.length()];
        values[joinKey] = key.get(0);
        values[time] = newest;
        for (int table = 0; table < tables.length; table++) {
            if (changed[table] && current[table] == null) {
                rows.get(table).clear();
            } else if (changed[table]) {
                rows.get(table).update(current[table]);
            }
            tables[table].fill(values, current[table]);
        }
        Row joined = new GenericRowWithSchema(values, schema);
        return scala.jdk.javaapi.CollectionConverters.asScala(List.of(joined).iterator());
    }
}

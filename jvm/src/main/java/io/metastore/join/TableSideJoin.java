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
 * A stream-table join whose table side is keyed state: the table's latest row per join key,
 * kept in the query's state store (so in its checkpoint), updated by the table's changelog and
 * cleared by its tombstones, as Kafka Streams keeps a table's side of a join.
 *
 * <p>The input is one streaming relation: the stream's records ({@code __MS_SIDE} 1) and the
 * table's changelog ({@code __MS_SIDE} 0), each with its join key ({@code __MS_JK}), its time,
 * partition and offset ({@code __MS_AT}, {@code __MS_AT_P}, {@code __MS_AT_O}), and the table's
 * columns (NULL on a stream record); a table record has {@code __MS_DELETED} true for a
 * tombstone. Per join key, a micro-batch's records are processed in turn: a table record
 * replaces or clears the key's row, a stream record is emitted with the key's current row in the
 * table's columns, or, if there is none, with NULLs there for a LEFT join and not at all for an
 * INNER one; the records go in the order Kafka Streams processes them ({@link Arrival}). The
 * output has the input's columns but the ones this join reads.
 */
public final class TableSideJoin extends StatefulProcessor<Row, Row, Row> {
    private static final long serialVersionUID = 1L;
    private static final int TABLE_SIDE = 0;

    private final TableColumns table;
    private final int side;
    private final int deleted;
    private final int time;
    private final int partition;
    private final int offset;
    private final boolean left;
    private final StructType schema;
    private transient ValueState<Row> current;

    private TableSideJoin(StructType schema, List<String> tableColumns, boolean left) {
        this.schema = schema;
        this.table = new TableColumns(schema, tableColumns);
        this.side = schema.fieldIndex("__MS_SIDE");
        this.deleted = schema.fieldIndex("__MS_DELETED");
        this.time = schema.fieldIndex("__MS_AT");
        this.partition = schema.fieldIndex("__MS_AT_P");
        this.offset = schema.fieldIndex("__MS_AT_O");
        this.left = left;
    }

    /**
     * Register {@code outputView}: the join of {@code streamView}'s records with
     * {@code tableView}'s changelog (unioned by column name), keyed by {@code __MS_JK};
     * {@code tableColumns} are the table's columns in {@code tableView}. The output has the
     * columns of both views but the ones this join reads ({@code __MS_SIDE}, {@code __MS_JK}...).
     */
    public static void register(SparkSession session, String streamView, String tableView,
                                String outputView, List<String> tableColumns, boolean left) {
        Dataset<Row> input = session.table(streamView).unionByName(session.table(tableView), true);
        StructType schema = input.schema();
        Keyed.process(input, "__MS_JK", new TableSideJoin(schema, tableColumns, left),
                      TimeMode.None(), schema)
                .drop("__MS_SIDE", "__MS_DELETED", "__MS_JK", "__MS_AT", "__MS_AT_P", "__MS_AT_O")
                .createOrReplaceTempView(outputView);
    }

    @Override
    public void init(OutputMode outputMode, TimeMode timeMode) {
        current = getHandle().getValueState("table_row", Encoders.row(table.schema),
                                            TTLConfig.NONE());
    }

    @Override
    public scala.collection.Iterator<Row> handleInputRows(Row key, scala.collection.Iterator<Row> rows,
                                                          TimerValues timerValues) {
        Row match = current.exists() ? current.get() : null;
        boolean changed = false;
        List<Row> out = new ArrayList<>();
        for (Row row : new Arrival(side, partition, offset, time).order(rows)) {
            if (row.getInt(side) == TABLE_SIDE) {
                changed = true;
                match = !row.isNullAt(deleted) && row.getBoolean(deleted) ? null : table.of(row);
            } else if (match != null || left) {
                Object[] values = new Object[row.length()];
                for (int i = 0; i < values.length; i++) {
                    values[i] = row.get(i);
                }
                table.fill(values, match);
                out.add(new GenericRowWithSchema(values, schema));
            }
        }
        if (changed && match == null) {
            current.clear();
        } else if (changed) {
            current.update(match);
        }
        return scala.jdk.javaapi.CollectionConverters.asScala(out.iterator());
    }
}

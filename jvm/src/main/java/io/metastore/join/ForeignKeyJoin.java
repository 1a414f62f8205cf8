package io.metastore.join;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import io.metastore.state.Keyed;

import org.apache.spark.sql.Column;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Encoders;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.expressions.GenericRowWithSchema;
import org.apache.spark.sql.functions;
import org.apache.spark.sql.streaming.MapState;
import org.apache.spark.sql.streaming.OutputMode;
import org.apache.spark.sql.streaming.StatefulProcessor;
import org.apache.spark.sql.streaming.TTLConfig;
import org.apache.spark.sql.streaming.TimeMode;
import org.apache.spark.sql.streaming.TimerValues;
import org.apache.spark.sql.streaming.ValueState;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;

/**
 * A foreign-key join of two tables whose sides are keyed state, as Kafka Streams' foreign-key
 * join keeps them: the left table's rows per left key ({@link ForeignKeySubscriptions}), and, per
 * foreign key, the right table's row and the left rows that reference it (its subscribers).
 *
 * <p>The inputs are the tables' changelogs, each record with its table's columns (under names of
 * their own), its key ({@code __MS_JK}), its time, partition and offset ({@code __MS_AT},
 * {@code __MS_AT_P}, {@code __MS_AT_O}) and whether it is a tombstone ({@code __MS_DELETED}); a
 * left record also has its foreign key ({@code __MS_FK}, of the right key's type). Per foreign
 * key, a micro-batch's unsubscriptions and subscriptions apply, then the right table's records in
 * offset order; one row is written for each left key the micro-batch touched: each left key
 * that subscribed, and every subscriber when the right row changed, with the left row and the
 * right row as they stand (NULLs where there is none); a left row deleted or without a foreign
 * key is written with no right row. So each touched left key has one row: its join after the
 * micro-batch. The output has the tables' columns, {@code __MS_JK} (the left key) and
 * {@code __MS_AT} (the newest time of the micro-batch's records it joins).
 */
public final class ForeignKeyJoin extends StatefulProcessor<Row, Row, Row> {
    private static final long serialVersionUID = 1L;

    private final StructType schema;
    private final TableColumns left;
    private final TableColumns right;
    private final StructType leftKeySchema;
    private final int joinKey;
    private final int foreignKey;
    private final int deleted;
    private final int time;
    private final int operation;
    private final int side;
    private final Arrival arrival;
    private transient ValueState<Row> rightRow;
    private transient MapState<Row, Row> subscribers;

    private ForeignKeyJoin(StructType schema, List<String> leftColumns, List<String> rightColumns) {
        this.schema = schema;
        this.left = new TableColumns(schema, leftColumns);
        this.right = new TableColumns(schema, rightColumns);
        this.joinKey = schema.fieldIndex("__MS_JK");
        this.leftKeySchema = new StructType(new StructField[] {schema.apply("__MS_JK")});
        this.foreignKey = schema.fieldIndex("__MS_FK");
        this.deleted = schema.fieldIndex("__MS_DELETED");
        this.time = schema.fieldIndex("__MS_AT");
        this.operation = schema.fieldIndex("__MS_OP");
        this.side = schema.fieldIndex("__MS_SIDE");
        this.arrival = new Arrival(side, schema.fieldIndex("__MS_AT_P"),
                                   schema.fieldIndex("__MS_AT_O"), time);
    }

    /**
     * Register {@code outputView}: the join of {@code leftView}'s changelog (side 0, with
     * {@code __MS_FK}) and {@code rightView}'s (side 1, keyed by {@code __MS_JK}, its key);
     * {@code leftColumns} and {@code rightColumns} are each table's columns there.
     */
    public static void register(SparkSession session, String leftView, String rightView,
                                String outputView, List<String> leftColumns,
                                List<String> rightColumns) {
        Dataset<Row> leftInput = session.table(leftView);
        StructType leftSchema = leftInput.schema();
        DataType foreignKeyType = leftSchema.apply("__MS_FK").dataType();
        DataType leftKeyType = leftSchema.apply("__MS_JK").dataType();
        StructType routeType = new StructType()
                .add("fk", foreignKeyType, true).add("jk", leftKeyType, true);
        StructType subscriptionSchema = leftSchema
                .add("__MS_OP", DataTypes.IntegerType, true).add("__MS_ROUTE", routeType, true);
        Dataset<Row> subscriptions = Keyed.process(
                leftInput, "__MS_JK",
                new ForeignKeySubscriptions(leftSchema, subscriptionSchema, leftColumns),
                TimeMode.None(), subscriptionSchema);
        Column rightRoute = functions.struct(
                functions.col("__MS_JK").cast(foreignKeyType).as("fk"),
                functions.lit(null).cast(leftKeyType).as("jk"));
        Dataset<Row> rightInput = session.table(rightView)
                .withColumn("__MS_ROUTE", rightRoute)
                .withColumn("__MS_FK", functions.col("__MS_JK").cast(foreignKeyType))
                .drop("__MS_JK");
        Dataset<Row> input = subscriptions.unionByName(rightInput, true);
        StructType schema = input.schema();
        Keyed.process(input, "__MS_ROUTE", new ForeignKeyJoin(schema, leftColumns, rightColumns),
                      TimeMode.None(), schema)
                .drop("__MS_SIDE", "__MS_DELETED", "__MS_AT_P", "__MS_AT_O", "__MS_FK", "__MS_OP",
                      "__MS_ROUTE")
                .createOrReplaceTempView(outputView);
    }

    @Override
    public void init(OutputMode outputMode, TimeMode timeMode) {
        rightRow = getHandle().getValueState("right_row", Encoders.row(right.schema),
                                             TTLConfig.NONE());
        subscribers = getHandle().getMapState("subscribers", Encoders.row(leftKeySchema),
                                              Encoders.row(left.schema), TTLConfig.NONE());
    }

    @Override
    public scala.collection.Iterator<Row> handleInputRows(Row route, scala.collection.Iterator<Row> rows,
                                                          TimerValues timerValues) {
        List<Row> results = new ArrayList<>();
        List<Row> subscribing = new ArrayList<>();
        List<Row> rightChanges = new ArrayList<>();
        for (Row row : arrival.order(rows)) {
            if (!row.isNullAt(side) && row.getInt(side) == 1) {
                rightChanges.add(row);
                continue;
            }
            int kind = row.getInt(operation);
            if (kind == ForeignKeySubscriptions.RESULT) {
                results.add(row);
            } else if (kind == ForeignKeySubscriptions.UNSUBSCRIBE) {
                subscribers.removeKey(RowFactory.create(row.get(joinKey)));
            } else {
                subscribing.add(row);
            }
        }
        List<Row> out = new ArrayList<>();
        for (Row row : results) {
            out.add(joined(row.get(joinKey), left.of(row), null, row.isNullAt(time) ? null : row.getLong(time)));
        }
        Map<Object, Row> touched = new LinkedHashMap<>();
        Map<Object, Long> subscribedAt = new HashMap<>();
        for (Row row : subscribing) {
            Row subscriber = left.of(row);
            subscribers.updateValue(RowFactory.create(row.get(joinKey)), subscriber);
            touched.put(comparable(row.get(joinKey)), subscriber);
            subscribedAt.put(comparable(row.get(joinKey)), row.isNullAt(time) ? null : row.getLong(time));
        }
        Row current = rightRow.exists() ? rightRow.get() : null;
        Long rightTime = null;
        for (Row change : rightChanges) {
            current = !change.isNullAt(deleted) && change.getBoolean(deleted) ? null : right.of(change);
            if (!change.isNullAt(time)) {
                rightTime = rightTime == null ? change.getLong(time) : Math.max(rightTime, change.getLong(time));
            }
        }
        if (!rightChanges.isEmpty()) {
            if (current == null) {
                rightRow.clear();
            } else {
                rightRow.update(current);
            }
            scala.collection.Iterator<scala.Tuple2<Row, Row>> all = subscribers.iterator();
            while (all.hasNext()) {
                scala.Tuple2<Row, Row> entry = all.next();
                touched.putIfAbsent(comparable(entry._1().get(0)), entry._2());
            }
        }
        for (Map.Entry<Object, Row> entry : touched.entrySet()) {
            Long at = newest(subscribedAt.get(entry.getKey()), rightTime);
            Object leftKey = entry.getKey() instanceof ByteBuffer bytes ? bytes.array() : entry.getKey();
            out.add(joined(leftKey, entry.getValue(), current, at));
        }
        return scala.jdk.javaapi.CollectionConverters.asScala(out.iterator());
    }

    /** A left key as a map key: a BYTES key by its content, not its array's identity. */
    private static Object comparable(Object key) {
        return key instanceof byte[] bytes ? ByteBuffer.wrap(bytes) : key;
    }

    private static Long newest(Long first, Long second) {
        if (first == null) {
            return second;
        }
        return second == null ? first : Math.max(first, second);
    }

    private Row joined(Object leftKey, Row leftRow, Row rightRowNow, Long at) {
        Object[] values = new Object[schema.length()];
        left.fill(values, leftRow);
        right.fill(values, rightRowNow);
        values[joinKey] = leftKey;
        values[time] = at;
        return new GenericRowWithSchema(values, schema);
    }
}

package io.metastore.aggregate;

import java.util.ArrayList;
import java.util.List;

import io.metastore.state.Keyed;
import io.metastore.state.Rows;

import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Encoders;
import org.apache.spark.sql.Row;
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
 * The groups of a table aggregation as keyed state: per group ({@code __MS_GROUP}), the table's
 * rows now in it, by row key ({@code __MS_RAW_KEY}), in the query's checkpoint.
 *
 * <p>The input is {@link RowVersions}' output with each change's group (rows in no group, such
 * as tombstones and rows the query's WHERE drops, left out). Per group, a micro-batch's
 * {@link RowVersions#LEFT} rows leave the group, then its {@link RowVersions#MEMBER} rows join
 * it (so a row that stays in its group is in it once). The output, for each group the
 * micro-batch touched, is every row now in the group ({@code __MS_SENTINEL} false), and the
 * changes that touched it ({@code __MS_SENTINEL} true: the rows that left and every version):
 * what the aggregation aggregates again, the sentinels in no aggregate. The output has the
 * input's columns but {@code __MS_CHANGE} and {@code __MS_GROUP}, and {@code __MS_SENTINEL}.
 */
public final class GroupMembers extends StatefulProcessor<Row, Row, Row> {
    private static final long serialVersionUID = 1L;

    private final StructType input;
    private final StructType output;
    private final int change;
    private final int rowKey;
    private transient MapState<byte[], Row> members;

    private GroupMembers(StructType input, StructType output) {
        this.input = input;
        this.output = output;
        this.change = input.fieldIndex("__MS_CHANGE");
        this.rowKey = input.fieldIndex("__MS_RAW_KEY");
    }

    /** Register {@code outputView}: the touched groups of {@code changesView}'s changes. */
    public static void register(SparkSession session, String changesView, String outputView) {
        Dataset<Row> changes = session.table(changesView);
        StructType input = changes.schema();
        StructType output = input.add("__MS_SENTINEL", DataTypes.BooleanType, false);
        Keyed.process(changes, "__MS_GROUP", new GroupMembers(input, output), TimeMode.None(),
                      output)
                .drop("__MS_CHANGE", "__MS_GROUP")
                .createOrReplaceTempView(outputView);
    }

    @Override
    public void init(OutputMode outputMode, TimeMode timeMode) {
        members = getHandle().getMapState("members", Encoders.BINARY(), Encoders.row(input),
                                          TTLConfig.NONE());
    }

    @Override
    public scala.collection.Iterator<Row> handleInputRows(Row group, scala.collection.Iterator<Row> rows,
                                                          TimerValues timerValues) {
        List<Row> joining = new ArrayList<>();
        List<Row> out = new ArrayList<>();
        while (rows.hasNext()) {
            Row row = rows.next();
            int kind = row.getInt(change);
            if (kind == RowVersions.MEMBER) {
                joining.add(row);
                continue;
            }
            if (kind == RowVersions.LEFT) {
                members.removeKey((byte[]) row.get(rowKey));
            }
            out.add(marked(row, true));
        }
        for (Row row : joining) {
            members.updateValue((byte[]) row.get(rowKey), row);
        }
        scala.collection.Iterator<Row> now = members.values();
        while (now.hasNext()) {
            out.add(marked(now.next(), false));
        }
        return scala.jdk.javaapi.CollectionConverters.asScala(out.iterator());
    }

    private Row marked(Row row, boolean sentinel) {
        return Rows.appended(row, output, sentinel);
    }
}

package io.metastore.state;

import org.apache.spark.api.java.function.MapFunction;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;

/** One column of a row, as the one-column row a keyed operator's state is keyed by. */
public final class KeyColumn implements MapFunction<Row, Row> {
    private static final long serialVersionUID = 1L;
    private final int index;

    public KeyColumn(int index) {
        this.index = index;
    }

    @Override
    public Row call(Row row) {
        return RowFactory.create(row.get(index));
    }
}

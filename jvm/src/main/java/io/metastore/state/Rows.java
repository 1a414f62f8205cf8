package io.metastore.state;

import org.apache.spark.sql.Row;
import org.apache.spark.sql.catalyst.expressions.GenericRowWithSchema;
import org.apache.spark.sql.types.StructType;

/** Rows a keyed processor writes: an input row's values with more after them. */
public final class Rows {
    private Rows() {
    }

    /** {@code row}'s values, then {@code more}, as a row of {@code schema}. */
    public static Row appended(Row row, StructType schema, Object... more) {
        Object[] values = new Object[schema.length()];
        int length = row.length();
        for (int i = 0; i < length; i++) {
            values[i] = row.get(i);
        }
        System.arraycopy(more, 0, values, length, more.length);
        return new GenericRowWithSchema(values, schema);
    }
}

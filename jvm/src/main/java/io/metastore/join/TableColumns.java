package io.metastore.join;

import java.io.Serializable;
import java.util.List;

import org.apache.spark.sql.Row;
import org.apache.spark.sql.catalyst.expressions.GenericRowWithSchema;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;

/**
 * A joined table's columns within a join's input rows: the table's row a record carries (what
 * the join keeps as state), and that row written back into an output row's columns.
 */
final class TableColumns implements Serializable {
    private static final long serialVersionUID = 1L;

    private final int[] fields;
    final StructType schema;

    TableColumns(StructType input, List<String> names) {
        this.fields = names.stream().mapToInt(input::fieldIndex).toArray();
        StructField[] structFields = new StructField[fields.length];
        for (int i = 0; i < fields.length; i++) {
            structFields[i] = input.fields()[fields[i]];
        }
        this.schema = new StructType(structFields);
    }

    /** The table's row in {@code record}. */
    Row of(Row record) {
        Object[] values = new Object[fields.length];
        for (int i = 0; i < fields.length; i++) {
            values[i] = record.get(fields[i]);
        }
        return new GenericRowWithSchema(values, schema);
    }

    /** {@code row}'s values (NULLs for no row) into the table's columns of {@code values}. */
    void fill(Object[] values, Row row) {
        for (int i = 0; i < fields.length; i++) {
            values[fields[i]] = row == null ? null : row.get(i);
        }
    }
}

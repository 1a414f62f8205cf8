package io.metastore.json;

import org.apache.spark.sql.catalyst.util.ArrayData;
import org.apache.spark.sql.connector.catalog.functions.BoundFunction;
import org.apache.spark.sql.connector.catalog.functions.ScalarFunction;
import org.apache.spark.sql.connector.catalog.functions.UnboundFunction;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * {@link JsonFields#read} as a Spark SQL function, {@code json_fields(text, names)}: Spark calls
 * its static {@code invoke} from generated code, with Spark's own string values, where
 * {@code java_method} would call it by reflection, with Java strings, and could return a string
 * only.
 */
public final class JsonFieldsFunction implements UnboundFunction, ScalarFunction<ArrayData> {
    private static final long serialVersionUID = 1L;
    public static final String NAME = "json_fields";

    /** Called by Spark's generated code for each record (ScalarFunction's magic method). */
    public static ArrayData invoke(UTF8String json, UTF8String names) {
        return JsonFields.read(json, names);
    }

    @Override
    public BoundFunction bind(StructType inputType) {
        if (inputType.fields().length != 2) {
            throw new UnsupportedOperationException(
                    NAME + " takes a JSON text and a JSON array of column names");
        }
        return this;
    }

    @Override
    public DataType[] inputTypes() {
        return new DataType[] {DataTypes.StringType, DataTypes.StringType};
    }

    @Override
    public DataType resultType() {
        return DataTypes.createArrayType(DataTypes.StringType, true);
    }

    @Override
    public boolean isResultNullable() {
        return false;
    }

    @Override
    public String description() {
        return NAME + "(text, names): the JSON fields the columns read (io.metastore.json.JsonFields)";
    }

    @Override
    public String name() {
        return NAME;
    }

    @Override
    public String canonicalName() {
        return "io.metastore.json." + NAME;
    }
}

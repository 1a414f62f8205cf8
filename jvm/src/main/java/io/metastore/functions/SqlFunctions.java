package io.metastore.functions;

import io.metastore.json.JsonFieldsFunction;
import org.apache.spark.sql.catalyst.analysis.NoSuchFunctionException;
import org.apache.spark.sql.connector.catalog.FunctionCatalog;
import org.apache.spark.sql.connector.catalog.Identifier;
import org.apache.spark.sql.connector.catalog.functions.UnboundFunction;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * The project's Spark SQL functions that need Spark's own values, not Java's: a Spark function
 * catalog (configured as {@code spark.sql.catalog.<name>}, so in every session of the
 * application) whose functions a query calls as {@code <name>.<function>(...)}. It holds
 * {@code json_fields} ({@link JsonFieldsFunction}), in no namespace.
 */
public final class SqlFunctions implements FunctionCatalog {
    private String catalogName;

    @Override
    public void initialize(String name, CaseInsensitiveStringMap options) {
        this.catalogName = name;
    }

    @Override
    public String name() {
        return catalogName;
    }

    @Override
    public Identifier[] listFunctions(String[] namespace) {
        if (namespace.length != 0) {
            return new Identifier[0];
        }
        return new Identifier[] {Identifier.of(new String[0], JsonFieldsFunction.NAME)};
    }

    @Override
    public UnboundFunction loadFunction(Identifier ident) throws NoSuchFunctionException {
        if (ident.namespace().length == 0 && JsonFieldsFunction.NAME.equals(ident.name())) {
            return new JsonFieldsFunction();
        }
        throw new NoSuchFunctionException(ident);
    }
}

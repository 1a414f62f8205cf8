package io.metastore.functions;

import io.metastore.json.JsonFieldsFunction;
import java.util.stream.Stream;
import org.apache.spark.sql.catalyst.analysis.NoSuchFunctionException;
import org.apache.spark.sql.connector.catalog.FunctionCatalog;
import org.apache.spark.sql.connector.catalog.Identifier;
import org.apache.spark.sql.connector.catalog.functions.UnboundFunction;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * The project's Spark SQL functions that need Spark's own values, not Java's: a Spark function
 * catalog (configured as {@code spark.sql.catalog.<name>}, so in every session of the
 * application) whose functions a query calls as {@code <name>.<function>(...)}. It holds
 * {@code json_fields} ({@link JsonFieldsFunction}) and the KAFKA format's numbers
 * ({@link KafkaNumbers}), in no namespace.
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
        return Stream.concat(Stream.of(JsonFieldsFunction.NAME),
                        KafkaNumbers.FUNCTIONS.keySet().stream().sorted())
                .map(name -> Identifier.of(new String[0], name)).toArray(Identifier[]::new);
    }

    @Override
    public UnboundFunction loadFunction(Identifier ident) throws NoSuchFunctionException {
        if (ident.namespace().length == 0 && JsonFieldsFunction.NAME.equals(ident.name())) {
            return new JsonFieldsFunction();
        }
        UnboundFunction number = ident.namespace().length == 0
                ? KafkaNumbers.FUNCTIONS.get(ident.name()) : null;
        if (number != null) {
            return number;
        }
        throw new NoSuchFunctionException(ident);
    }
}

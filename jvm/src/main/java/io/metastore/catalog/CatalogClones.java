package io.metastore.catalog;

import java.lang.reflect.Method;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.TableIdentifier;
import org.apache.spark.sql.catalyst.catalog.CatalogTable;
import org.apache.spark.sql.catalyst.catalog.SessionCatalog;
import org.apache.spark.sql.types.StructType;

import scala.Option;
import scala.jdk.javaapi.CollectionConverters;

/**
 * Creates a batch of catalog objects in one call, each a copy of a template object that Spark
 * created itself through SQL, with its own name, options, properties and (for a view) text and
 * schema. A {@code CREATE VIEW} through SQL analyzes its query (tens of milliseconds); a copy
 * skips the analysis and the SQL round trip, and goes straight to the session catalog.
 *
 * <p>The batch is JSON: a list of objects with {@code database}, {@code name},
 * {@code properties} (replacing the template's {@code metastore.*} ones), and {@code options}
 * for a table (its storage properties) or {@code text}, {@code schema} (DDL) and
 * {@code columns} for a view. Fields of the template are replaced by name, so the copy follows
 * {@link CatalogTable}'s fields whatever their number.
 */
public final class CatalogClones {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final String OWN_PREFIX = "metastore.";

    private CatalogClones() {
    }

    /** Creates every object of {@code batchJson} from {@code template}; the number created. */
    public static int create(SparkSession spark, CatalogTable template, String batchJson)
            throws Exception {
        SessionCatalog catalog = spark.sessionState().catalog();
        boolean view = template.tableType().name().equals("VIEW");
        int created = 0;
        for (JsonNode object : JSON.readTree(batchJson)) {
            TableIdentifier identifier = new TableIdentifier(object.get("name").asText(),
                    Option.apply(object.get("database").asText()));
            Map<String, Object> fields = new HashMap<>();
            fields.put("identifier", identifier);
            Map<String, String> properties = withoutOwn(template.properties());
            properties.putAll(strings(object.get("properties")));
            if (view) {
                String text = object.get("text").asText();
                properties.keySet().removeIf(
                        key -> key.startsWith(CatalogTable.VIEW_QUERY_OUTPUT_PREFIX()));
                List<String> columns = new ArrayList<>();
                object.get("columns").forEach(column -> columns.add(column.asText()));
                properties.put(CatalogTable.VIEW_QUERY_OUTPUT_NUM_COLUMNS(),
                        Integer.toString(columns.size()));
                for (int i = 0; i < columns.size(); i++) {
                    properties.put(CatalogTable.VIEW_QUERY_OUTPUT_COLUMN_NAME_PREFIX() + i,
                            columns.get(i));
                }
                fields.put("schema", StructType.fromDDL(object.get("schema").asText()));
                fields.put("viewText", Option.apply(text));
                fields.put("viewOriginalText", Option.apply(text));
            } else {
                Map<String, Object> storage = new HashMap<>();
                storage.put("locationUri", Option.apply(catalog.defaultTablePath(identifier)));
                storage.put("properties", scalaMap(strings(object.get("options"))));
                fields.put("storage", copy(template.storage(), storage));
            }
            fields.put("properties", scalaMap(properties));
            fields.put("createTime", System.currentTimeMillis());
            catalog.createTable(copy(template, fields), false, false);
            created++;
        }
        return created;
    }

    /**
     * {@code template} with the named fields replaced (Scala's {@code copy}, by name): Spark's
     * catalog case classes gain fields between releases, their names stay.
     */
    @SuppressWarnings("unchecked")
    private static <T extends scala.Product> T copy(T template, Map<String, Object> replaced)
            throws Exception {
        List<Object> arguments = new ArrayList<>();
        Iterator<String> names = CollectionConverters.asJava(template.productElementNames());
        int index = 0;
        int found = 0;
        while (names.hasNext()) {
            String name = names.next();
            found += replaced.containsKey(name) ? 1 : 0;
            arguments.add(replaced.containsKey(name) ? replaced.get(name)
                    : template.productElement(index));
            index++;
        }
        if (found != replaced.size()) {
            throw new IllegalStateException(template.getClass().getSimpleName()
                    + " lacks a field of " + replaced.keySet());
        }
        for (Method method : template.getClass().getMethods()) {
            if (method.getName().equals("copy") && method.getParameterCount() == arguments.size()) {
                return (T) method.invoke(template, arguments.toArray());
            }
        }
        throw new IllegalStateException(template.getClass().getSimpleName() + " has no copy of "
                + arguments.size() + " fields");
    }

    private static Map<String, String> withoutOwn(scala.collection.immutable.Map<String, String> map) {
        Map<String, String> result = new HashMap<>(CollectionConverters.asJava(map));
        result.keySet().removeIf(key -> key.startsWith(OWN_PREFIX));
        return result;
    }

    private static Map<String, String> strings(JsonNode node) {
        Map<String, String> result = new HashMap<>();
        node.fields().forEachRemaining(entry -> result.put(entry.getKey(), entry.getValue().asText()));
        return result;
    }

    private static scala.collection.immutable.Map<String, String> scalaMap(Map<String, String> map) {
        return scala.collection.immutable.Map$.MODULE$.from(CollectionConverters.asScala(map));
    }
}

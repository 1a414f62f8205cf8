package io.metastore.json;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonGenerator;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.util.HashMap;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.spark.sql.catalyst.json.JSONOptions;
import org.apache.spark.sql.catalyst.util.ArrayData;
import org.apache.spark.sql.catalyst.util.GenericArrayData;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * The fields of a JSON object that a source's columns read, found in one streaming pass over the
 * record, as ksqlDB's JSON deserializer finds them ({@code KsqlJsonDeserializer}): a column
 * reads the field of its exact name, else the field whose upper-cased name is its name; of
 * repeated names, the last.
 *
 * <p>What it returns, per column in order, is what Spark's {@code from_json} with a
 * {@code STRING} field gives for that field, and whether the field is a JSON string: the
 * content of a string, the text Spark's parser writes for any other value (a number as Java
 * prints it, {@code true}, an object or an array as compact JSON), NULL for JSON {@code null}
 * or a field the object lacks. ksqlDB's rules on those texts (which kinds a type takes, which
 * values it refuses) stay in the SQL that reads them (metastore.spark.views), as for every other
 * format. The object is read with Spark's own JSON reading options, so a text this reads is a
 * text Spark's {@code from_json} reads.
 *
 * <p>The result has two elements per column, the field's text then {@code "s"} when the field is
 * a JSON string (else NULL), and a last element: NULL when the record is a JSON object or JSON
 * {@code null} (or no record at all: every field NULL), {@code "refused"} when it is anything
 * else (not JSON, a number, a string, an array), which ksqlDB's deserializer refuses.
 *
 * <p>The columns are a JSON array of names, a literal of the query; each distinct one is parsed
 * once.
 */
public final class JsonFields {
    private static final String REFUSED = "refused";
    private static final UTF8String REFUSED_TEXT = UTF8String.fromString(REFUSED);
    private static final UTF8String STRING_KIND = UTF8String.fromString("s");
    private static final UTF8String TRUE = UTF8String.fromString("true");
    private static final UTF8String FALSE = UTF8String.fromString("false");
    private static final ObjectMapper MAPPER = new ObjectMapper();
    private static final int CACHED_COLUMN_LISTS = 1000;
    private static final Map<UTF8String, Columns> COLUMN_LISTS = new ConcurrentHashMap<>();
    private static volatile Recent mostRecent;
    private static final JsonFactory FACTORY = new JSONOptions(
            scala.collection.immutable.Map$.MODULE$.<String, String>empty(), "UTC", "")
            .buildJsonFactory();

    private JsonFields() {
    }

    /**
     * The fields of {@code json} (an object's text, or NULL) that the columns {@code names} (a
     * JSON array of strings) read, laid out as the class says.
     */
    public static ArrayData read(UTF8String json, UTF8String names) {
        Columns columns = columns(names);
        Object[] result = new Object[columns.count * 2 + 1];
        if (json == null) {
            return new GenericArrayData(result);
        }
        try (JsonParser parser = FACTORY.createParser(json.getBytes())) {
            JsonToken first = parser.nextToken();
            if (first == JsonToken.VALUE_NULL) {
                return new GenericArrayData(result);
            }
            if (first != JsonToken.START_OBJECT || !readObject(parser, columns, result)) {
                return refused(result);
            }
            return new GenericArrayData(result);
        } catch (IOException | RuntimeException e) {
            return refused(result);
        }
    }

    private static ArrayData refused(Object[] result) {
        java.util.Arrays.fill(result, null);
        result[result.length - 1] = REFUSED_TEXT;
        return new GenericArrayData(result);
    }

    /** Reads the object's fields into {@code result}; false when the object is not whole. */
    private static boolean readObject(JsonParser parser, Columns columns, Object[] result)
            throws IOException {
        boolean[] exact = new boolean[columns.count];
        for (JsonToken token = parser.nextToken(); token != JsonToken.END_OBJECT;
                token = parser.nextToken()) {
            if (token != JsonToken.FIELD_NAME) {
                return false;
            }
            Match match = columns.match(parser.currentName());
            JsonToken value = parser.nextToken();
            if (value == null) {
                return false;
            }
            if (match == null) {
                parser.skipChildren();
                continue;
            }
            UTF8String text = text(parser, value);
            boolean string = value == JsonToken.VALUE_STRING;
            if (match.exact >= 0) {
                exact[match.exact] = true;
                put(result, match.exact, text, string);
            }
            if (match.upper >= 0 && !exact[match.upper]) {
                put(result, match.upper, text, string);
            }
        }
        return true;
    }

    private static void put(Object[] result, int column, UTF8String text, boolean string) {
        result[column * 2] = text;
        result[column * 2 + 1] = string ? STRING_KIND : null;
    }

    /** The field's text as Spark's JSON reader gives a {@code STRING} field. */
    private static UTF8String text(JsonParser parser, JsonToken value) throws IOException {
        switch (value) {
            case VALUE_NULL:
                return null;
            case VALUE_STRING:
                return UTF8String.fromString(parser.getText());
            case VALUE_TRUE:
                return TRUE;
            case VALUE_FALSE:
                return FALSE;
            case VALUE_NUMBER_INT:
                return UTF8String.fromString(parser.getNumberValue().toString());
            case VALUE_NUMBER_FLOAT:
                double number = parser.getDoubleValue();
                // as Jackson writes a finite double; it quotes NaN and the infinities
                return Double.isFinite(number) ? UTF8String.fromString(Double.toString(number))
                        : copied(parser);
            default:
                return copied(parser);
        }
    }

    /** The value the parser is at, written again as Spark writes a non-string field's text. */
    private static UTF8String copied(JsonParser parser) throws IOException {
        ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        try (JsonGenerator generator = FACTORY.createGenerator(bytes)) {
            generator.copyCurrentStructure(parser);
        }
        return UTF8String.fromBytes(bytes.toByteArray());
    }

    private static Columns columns(UTF8String names) {
        Recent recent = mostRecent;
        if (recent != null && recent.names == names) {  // a query's literal: one object a call
            return recent.columns;
        }
        Columns columns = COLUMN_LISTS.get(names);
        if (columns == null) {
            columns = Columns.of(names.toString());
            if (COLUMN_LISTS.size() < CACHED_COLUMN_LISTS) {
                COLUMN_LISTS.put(names.clone(), columns);
            }
        }
        mostRecent = new Recent(names, columns);
        return columns;
    }

    /** The columns of the names object read last, found again without hashing its bytes. */
    private static final class Recent {
        final UTF8String names;
        final Columns columns;

        Recent(UTF8String names, Columns columns) {
            this.names = names;
            this.columns = columns;
        }
    }

    /** The column a field name is the exact name of, and the one it is the upper-cased name of. */
    private static final class Match {
        final int exact;
        final int upper;

        Match(int exact, int upper) {
            this.exact = exact;
            this.upper = upper;
        }
    }

    /** A list of column names, with the match of each field name seen (up to a bound). */
    private static final class Columns {
        private static final int CACHED_NAMES = 10_000;
        final int count;
        private final Map<String, Integer> positions;
        private final Map<String, Match> matches = new ConcurrentHashMap<>();

        private Columns(Map<String, Integer> positions, int count) {
            this.positions = positions;
            this.count = count;
        }

        static Columns of(String names) {
            String[] parsed;
            try {
                parsed = MAPPER.readValue(names, String[].class);
            } catch (IOException e) {
                throw new IllegalArgumentException("column names are not a JSON array: " + names, e);
            }
            Map<String, Integer> positions = new HashMap<>();
            for (int i = 0; i < parsed.length; i++) {
                positions.put(parsed[i], i);
            }
            return new Columns(positions, parsed.length);
        }

        /** The columns {@code name} is read by, or null when none reads it. */
        Match match(String name) {
            Match cached = matches.get(name);
            if (cached != null) {
                return cached == NONE ? null : cached;
            }
            int exact = positions.getOrDefault(name, -1);
            int upper = positions.getOrDefault(name.toUpperCase(Locale.ROOT), -1);
            Match found = exact < 0 && upper < 0 ? NONE : new Match(exact, upper == exact ? -1 : upper);
            if (matches.size() < CACHED_NAMES) {
                matches.put(name, found);
            }
            return found == NONE ? null : found;
        }

        private static final Match NONE = new Match(-1, -1);
    }
}

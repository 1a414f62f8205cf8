package io.metastore.json;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonGenerator;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.spark.sql.catalyst.json.JSONOptions;
import org.apache.spark.sql.catalyst.util.ArrayData;
import org.apache.spark.sql.catalyst.util.GenericArrayData;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * The fields of a JSON object that a source's columns read, found in one streaming pass over the
 * record, as ksqlDB's JSON deserializer finds them ({@code KsqlJsonDeserializer} over Jackson's
 * {@code ObjectNode}): a column reads the field of its exact name (of a repeated name, the last
 * value), else the field whose upper-cased name is its name; of several such names, the one
 * whose first occurrence is last, with its last value (the node keeps each name where it first
 * came, and the upper-cased copy takes its fields in that order).
 *
 * <p>The record's bytes are read as ksqlDB's deserializer reads them, as JSON in UTF-8 (or in
 * the UTF-16 or UTF-32 a byte-order mark or its first bytes show): bytes that are not valid
 * UTF-8 make the record unreadable. What it returns per column, in order, is what Spark's
 * {@code from_json} with a {@code STRING} field gives for that field, and whether the field is a
 * JSON string: the content of a string, the text Spark's parser writes for any other value (a
 * number as Java prints it, {@code true}, an object or an array as compact JSON), NULL for JSON
 * {@code null} or a field the object lacks. ksqlDB's rules on those texts (which kinds a type
 * takes, which values it refuses) stay in the SQL that reads them (metastore.spark.views), as
 * for every other format. The parser has Spark's JSON reading options (single quotes, NaN, its
 * limits).
 *
 * <p>The result has two elements per column, the field's text then {@code "s"} when the field is
 * a JSON string (else NULL), and a last element: NULL when the record is a JSON object or JSON
 * {@code null} (or no record at all: every field NULL), {@code "refused"} when it is anything
 * else (not JSON, a number, a string, an array), which ksqlDB's deserializer refuses.
 *
 * <p>The columns are a JSON array of names, a literal of the query; each distinct list is parsed
 * once (while at most {@value #CACHED_COLUMN_LISTS} are kept), and found again by identity on
 * the thread that last read it.
 */
public final class JsonFields {
    private static final UTF8String REFUSED = UTF8String.fromString("refused");
    private static final UTF8String STRING_KIND = UTF8String.fromString("s");
    private static final UTF8String TRUE = UTF8String.fromString("true");
    private static final UTF8String FALSE = UTF8String.fromString("false");
    private static final ObjectMapper MAPPER = new ObjectMapper();
    private static final int CACHED_COLUMN_LISTS = 1000;
    private static final int RECENT_LISTS = 4;
    private static final Map<UTF8String, Columns> COLUMN_LISTS = new ConcurrentHashMap<>();
    private static final ThreadLocal<Recent> RECENT = ThreadLocal.withInitial(Recent::new);
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
        Columns columns = RECENT.get().columns(names);
        Object[] result = new Object[columns.count * 2 + 1];
        if (json == null) {
            return new GenericArrayData(result);
        }
        try (JsonParser parser = FACTORY.createParser(json.getBytes())) {
            JsonToken first = parser.nextToken();
            if (first == JsonToken.VALUE_NULL) {
                return new GenericArrayData(result);
            }
            if (first != JsonToken.START_OBJECT || !new ObjectReading(columns, result).read(parser)) {
                return refused(result);
            }
            return new GenericArrayData(result);
        } catch (IOException | RuntimeException e) {
            // a record the parser cannot read is skipped, never a failed query: whatever Jackson
            // throws at bytes that are no JSON (not only its IOExceptions) refuses the record
            return refused(result);
        }
    }

    private static ArrayData refused(Object[] result) {
        Arrays.fill(result, null);
        result[result.length - 1] = REFUSED;
        return new GenericArrayData(result);
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
            case VALUE_NUMBER_INT:  // as Jackson writes an int, a long or a big integer
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

    /** One record's object, read field by field into its result. */
    private static final class ObjectReading {
        private final Columns columns;
        private final Object[] result;
        private final boolean[] exact;
        private final String[] upperName;
        private List<List<String>> upperNamesSeen;

        ObjectReading(Columns columns, Object[] result) {
            this.columns = columns;
            this.result = result;
            this.exact = new boolean[columns.count];
            this.upperName = new String[columns.count];
        }

        /** Reads the object's fields; false when the object is not whole. */
        boolean read(JsonParser parser) throws IOException {
            for (JsonToken token = parser.nextToken(); token != JsonToken.END_OBJECT;
                    token = parser.nextToken()) {
                if (token != JsonToken.FIELD_NAME) {
                    return false;
                }
                String name = parser.currentName();
                Match match = columns.match(name);
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
                    put(match.exact, text, string);
                }
                if (match.upper >= 0 && !exact[match.upper] && takesUpper(match.upper, name)) {
                    put(match.upper, text, string);
                }
            }
            return true;
        }

        /**
         * Whether the field {@code name}, whose upper-cased name is {@code column}'s, is the one
         * it reads: a name first seen now, or the name first seen last, again.
         */
        private boolean takesUpper(int column, String name) {
            String current = upperName[column];
            if (current == null || current.equals(name)) {
                upperName[column] = name;
                return true;
            }
            List<String> seen = seenFor(column, current);
            if (seen.contains(name)) {
                return false;
            }
            seen.add(name);
            upperName[column] = name;
            return true;
        }

        /** The names of the column's upper-cased matches seen so far (rare: kept lazily). */
        private List<String> seenFor(int column, String first) {
            if (upperNamesSeen == null) {
                upperNamesSeen = new ArrayList<>(columns.count);
                for (int i = 0; i < columns.count; i++) {
                    upperNamesSeen.add(null);
                }
            }
            List<String> seen = upperNamesSeen.get(column);
            if (seen == null) {
                seen = new ArrayList<>(List.of(first));
                upperNamesSeen.set(column, seen);
            }
            return seen;
        }

        private void put(int column, UTF8String text, boolean string) {
            result[column * 2] = text;
            result[column * 2 + 1] = string ? STRING_KIND : null;
        }
    }

    /** A thread's last column lists, by the identity of the literal they came from. */
    private static final class Recent {
        private final UTF8String[] names = new UTF8String[RECENT_LISTS];
        private final Columns[] columns = new Columns[RECENT_LISTS];
        private int next;

        Columns columns(UTF8String literal) {
            for (int i = 0; i < RECENT_LISTS; i++) {
                if (names[i] == literal) {  // a query's literal: one object at every call
                    return columns[i];
                }
            }
            Columns found = shared(literal);
            names[next] = literal;
            columns[next] = found;
            next = (next + 1) % RECENT_LISTS;
            return found;
        }

        private static Columns shared(UTF8String literal) {
            Columns found = COLUMN_LISTS.get(literal);
            if (found != null) {
                return found;
            }
            found = Columns.of(literal.toString());
            if (COLUMN_LISTS.size() >= CACHED_COLUMN_LISTS) {
                COLUMN_LISTS.clear();  // lists of queries long gone, most of them
            }
            COLUMN_LISTS.put(literal.clone(), found);
            return found;
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

    /** A list of column names, with what each field name seen matches (or NONE). */
    private static final class Columns {
        private static final int CACHED_NAMES = 10_000;
        private static final int CACHED_NAME_CHARS = 256;
        private static final Match NONE = new Match(-1, -1);
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

        /**
         * The columns {@code name} is read by, or null when none reads it. Only short names are
         * kept, and only so many: what hostile names can hold is bounded, and the usual fields
         * that no column reads are found again without upper-casing them at each record.
         */
        Match match(String name) {
            Match cached = matches.get(name);
            if (cached != null) {
                return cached == NONE ? null : cached;
            }
            int exact = positions.getOrDefault(name, -1);
            // ksqlDB upper-cases in the JVM's locale; ROOT differs only for Turkish,
            // Azeri and Lithuanian locales, where a node would not match ksqlDB anyway
            int upper = positions.getOrDefault(name.toUpperCase(Locale.ROOT), -1);
            Match found = exact < 0 && upper < 0 ? NONE
                    : new Match(exact, upper == exact ? -1 : upper);
            if (matches.size() < CACHED_NAMES && name.length() <= CACHED_NAME_CHARS) {
                matches.put(name, found);
            }
            return found == NONE ? null : found;
        }
    }
}

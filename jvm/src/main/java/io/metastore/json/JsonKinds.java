package io.metastore.json;

import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import java.io.IOException;
import java.math.BigDecimal;
import java.math.RoundingMode;
import java.util.HashMap;
import java.util.Iterator;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Function;

/**
 * Whether ksqlDB's JSON deserializer accepts a JSON value as a SQL type, at every level of it:
 * called from Spark SQL with {@code java_method} for a column whose type nests others (an ARRAY,
 * a MAP, a STRUCT), whose elements and fields Spark's {@code from_json} reads by their text,
 * where ksqlDB refuses a value of the wrong JSON kind and the whole record with it; and for a
 * DECIMAL column of the JSON and DELIMITED formats, whose text Spark's cast would round.
 *
 * <p>The rules are ksqlDB's ({@code KsqlJsonDeserializer}, {@code JsonSerdeUtils}): JSON
 * {@code null} or an absent field is a NULL of any type; a BOOLEAN only from {@code true} or
 * {@code false}; an INTEGER, a BIGINT, a DATE, a TIME or a TIMESTAMP from a number or a string
 * Java's {@code Integer.parseInt} or {@code Long.parseLong} reads (a TIME within a day); a DOUBLE
 * from a number or a string {@code Double.parseDouble} reads; a DECIMAL from a number or a
 * string {@code BigDecimal} reads, whose absolute value is below 10 to the power of its integer
 * digits and that takes its scale without rounding ({@code DecimalUtil.ensureFit}); a STRING
 * from anything; BYTES only from a base64 string; an ARRAY only from an array, a MAP and a STRUCT
 * only from an object (a STRUCT's fields by name, else by upper-cased name).
 *
 * <p>The type is a descriptor the project writes (metastore.spark.views): a JSON object
 * {@code {"t": "INTEGER"}}, {@code {"t": "DECIMAL", "p": 4, "s": 2}},
 * {@code {"t": "ARRAY", "e": ...}}, {@code {"t": "MAP", "v": ...}} or
 * {@code {"t": "STRUCT", "f": [["NAME", ...], ...]}}.
 */
public final class JsonKinds {
    private static final ObjectMapper MAPPER = new ObjectMapper()
            .enable(DeserializationFeature.USE_BIG_DECIMAL_FOR_FLOATS)
            .setNodeFactory(JsonNodeFactory.withExactBigDecimals(true));
    private static final int CACHED_TYPES = 1000;
    private static final Map<String, JsonNode> TYPES = new ConcurrentHashMap<>();
    private static final long MILLIS_PER_DAY = 86_400_000L;

    private JsonKinds() {
    }

    /**
     * {@code "true"} when ksqlDB reads {@code json} as the type {@code descriptor} describes (a
     * NULL text too: there is no value), {@code "false"} when it refuses it or it is no JSON.
     * A text, not a boolean: {@code java_method} returns its result as a string.
     */
    public static String accepts(String json, String descriptor) {
        if (json == null) {
            return "true";
        }
        try {
            return Boolean.toString(accepted(MAPPER.readTree(json), type(descriptor)));
        } catch (IOException | RuntimeException e) {
            return "false";
        }
    }

    /**
     * {@code "true"} when ksqlDB's JSON and DELIMITED deserializers read the text {@code number}
     * (a DELIMITED field, or a JSON field's number or string) as a DECIMAL of {@code precision}
     * and {@code scale}: {@code BigDecimal} parses it, and it fits without rounding
     * ({@code DecimalUtil.ensureFit}). A NULL text is {@code "true"}: there is no value.
     */
    public static String fitsDecimal(String number, int precision, int scale) {
        if (number == null) {
            return "true";
        }
        try {
            return Boolean.toString(fits(new BigDecimal(number), precision, scale));
        } catch (NumberFormatException e) {
            return "false";
        }
    }

    private static JsonNode type(String descriptor) throws IOException {
        JsonNode cached = TYPES.get(descriptor);
        if (cached != null) {
            return cached;
        }
        JsonNode parsed = MAPPER.readTree(descriptor);
        if (TYPES.size() < CACHED_TYPES) {
            TYPES.put(descriptor, parsed);
        }
        return parsed;
    }

    private static boolean accepted(JsonNode value, JsonNode type) {
        if (value == null || value.isNull() || value.isMissingNode()) {
            return true;
        }
        switch (type.get("t").asText()) {
            case "BOOLEAN":
                return value.isBoolean();
            case "INTEGER":
                return number(value, JsonNode::intValue, Integer::valueOf) != null;
            case "BIGINT":
            case "DATE":
            case "TIMESTAMP":
                return number(value, JsonNode::asLong, Long::valueOf) != null;
            case "TIME":
                return isTime(value);
            case "DOUBLE":
                return number(value, JsonNode::doubleValue, Double::valueOf) != null;
            case "DECIMAL":
                return decimalAccepted(value, type.get("p").asInt(), type.get("s").asInt());
            case "STRING":
                return true;
            case "BYTES":
                return isBase64(value);
            case "ARRAY":
                return value.isArray() && allAccepted(value.elements(), type.get("e"));
            case "MAP":
                return value.isObject() && allAccepted(value.elements(), type.get("v"));
            case "STRUCT":
                return value.isObject() && fieldsAccepted(value, type.get("f"));
            default:
                return false;
        }
    }

    private static boolean allAccepted(Iterator<JsonNode> values, JsonNode type) {
        while (values.hasNext()) {
            if (!accepted(values.next(), type)) {
                return false;
            }
        }
        return true;
    }

    private static boolean fieldsAccepted(JsonNode object, JsonNode fields) {
        Map<String, JsonNode> upperCased = new HashMap<>();
        object.fields().forEachRemaining(
                entry -> upperCased.put(entry.getKey().toUpperCase(Locale.ROOT), entry.getValue()));
        for (JsonNode field : fields) {
            String name = field.get(0).asText();
            JsonNode value = object.has(name) ? object.get(name) : upperCased.get(name);
            if (!accepted(value, field.get(1))) {
                return false;
            }
        }
        return true;
    }

    private static boolean isTime(JsonNode value) {
        Long millis = number(value, JsonNode::asLong, Long::valueOf);
        return millis != null && millis >= 0 && millis <= MILLIS_PER_DAY;
    }

    private static boolean decimalAccepted(JsonNode value, int precision, int scale) {
        BigDecimal decimal = number(value, JsonNode::decimalValue, BigDecimal::new);
        return decimal != null && fits(decimal, precision, scale);
    }

    private static boolean fits(BigDecimal decimal, int precision, int scale) {
        if (decimal.abs().compareTo(BigDecimal.TEN.pow(precision - scale)) >= 0) {
            return false;
        }
        try {
            decimal.setScale(scale, RoundingMode.UNNECESSARY);
            return true;
        } catch (ArithmeticException e) {
            return false;
        }
    }

    private static boolean isBase64(JsonNode value) {
        if (!value.isTextual()) {
            return false;
        }
        try {
            value.binaryValue();
            return true;
        } catch (IOException e) {
            return false;
        }
    }

    /**
     * {@code value} as a number: a JSON number read by {@code ofNumber}, or a JSON string that
     * {@code parse} reads (as ksqlDB's deserializer parses one); null for anything else.
     */
    private static <T> T number(JsonNode value, Function<JsonNode, T> ofNumber,
                                Function<String, T> parse) {
        if (value.isNumber()) {
            return ofNumber.apply(value);
        }
        if (!value.isTextual()) {
            return null;
        }
        try {
            return parse.apply(value.textValue());
        } catch (NumberFormatException e) {
            return null;
        }
    }
}

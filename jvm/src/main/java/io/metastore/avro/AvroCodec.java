package io.metastore.avro;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.StringWriter;
import java.math.BigDecimal;
import java.math.BigInteger;
import java.math.RoundingMode;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Base64;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonGenerator;
import com.fasterxml.jackson.core.json.JsonReadFeature;
import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.json.JsonMapper;
import org.apache.avro.AvroRuntimeException;
import org.apache.avro.LogicalType;
import org.apache.avro.LogicalTypes;
import org.apache.avro.NameValidator;
import org.apache.avro.Schema;
import org.apache.avro.generic.GenericData;
import org.apache.avro.generic.GenericDatumReader;
import org.apache.avro.generic.GenericDatumWriter;
import org.apache.avro.generic.GenericFixed;
import org.apache.avro.generic.IndexedRecord;
import org.apache.avro.io.BinaryEncoder;
import org.apache.avro.io.DecoderFactory;
import org.apache.avro.io.EncoderFactory;

/**
 * ksqlDB's AVRO records (Confluent's wire format: a zero magic byte, the writer schema's 4-byte
 * registry id, the Avro binary) to and from ksqlDB's JSON representation of the same values, for
 * Spark SQL's {@code java_method}, which passes and returns only strings.
 *
 * <p>{@link #decode} reads a record (base64) with its writer's schema, fetched from the session's
 * Schema Registry by the record's id, into JSON text; {@link #encode} writes JSON text as a record
 * of the given schema, registered under the given subject. A NULL in is a NULL out, returned as
 * the text {@code null}, which no base64 record and no decoded value can be. The JSON is the one
 * ksqlDB's JSON format writes: {@code timestamp-millis} as epoch milliseconds, {@code date} as
 * epoch days, {@code time-millis} as milliseconds of the day, {@code decimal} as a number, bytes
 * as base64, an enum as its symbol, a union as the value of its branch. A record that is not in
 * the wire format, or does not parse, decodes to NULL.
 */
public final class AvroCodec {
    private static final ObjectMapper MAPPER = JsonMapper.builder()
            .enable(JsonReadFeature.ALLOW_NON_NUMERIC_NUMBERS)
            .enable(DeserializationFeature.USE_BIG_DECIMAL_FOR_FLOATS)
            .enable(DeserializationFeature.USE_BIG_INTEGER_FOR_INTS)
            .build();
    private static final JsonFactory JSON = MAPPER.getFactory();
    private static final Map<String, Schema> PARSED = new ConcurrentHashMap<>();
    private static final byte MAGIC = 0;

    private AvroCodec() {
    }

    /** The record {@code base64} as JSON text, or NULL; its schema from the session's registry. */
    public static String decode(String base64) {
        return base64 == null ? null : decodeWith(RegistryCalls.sessionUrl(), base64);
    }

    /** The JSON text as a record of {@code schema} registered under {@code subject}, or NULL. */
    public static String encode(String schema, String subject, String text) {
        return text == null ? null : encodeWith(RegistryCalls.sessionUrl(), schema, subject, text);
    }

    /** {@link #decode} with the registry at {@code url}. */
    public static String decodeWith(String url, String base64) {
        if (base64 == null) {
            return null;
        }
        byte[] bytes = Base64.getMimeDecoder().decode(base64);
        if (bytes.length < 5 || bytes[0] != MAGIC) {
            return null;
        }
        int id = ByteBuffer.wrap(bytes, 1, 4).getInt();
        Schema writer;
        try {
            writer = parse(RegistryCalls.schemaOf(url, id));
        } catch (RegistryCalls.UnavailableException e) {
            throw e;  // the task fails and is retried: a record is never dropped for an outage
        } catch (RuntimeException e) {
            return null;  // an id the registry does not know, or a schema that is not Avro
        }
        Object datum;
        try {
            datum = new GenericDatumReader<Object>(writer).read(null,
                    DecoderFactory.get().binaryDecoder(bytes, 5, bytes.length - 5, null));
        } catch (IOException | AvroRuntimeException | IndexOutOfBoundsException e) {
            return null;
        }
        StringWriter out = new StringWriter();
        try (JsonGenerator json = JSON.createGenerator(out)) {
            write(json, writer, datum);
        } catch (IOException | RuntimeException e) {  // e.g. a decimal of no bytes
            return null;
        }
        return out.toString();
    }

    /** {@link #encode} with the registry at {@code url}. */
    public static String encodeWith(String url, String schemaText, String subject, String text) {
        if (text == null) {
            return null;
        }
        JsonNode node;
        try {
            node = MAPPER.readTree(text);
        } catch (IOException e) {
            throw new IllegalArgumentException("not JSON: " + text, e);
        }
        if (node == null || node.isNull()) {
            return null;
        }
        Schema schema = parse(schemaText);
        Object datum;
        try {
            datum = toAvro(schema, node, schema.getFullName());
        } catch (IllegalArgumentException e) {
            throw UnwritableRecord.of(subject, e);
        }
        int id = RegistryCalls.register(url, subject, "AVRO", schemaText);
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        out.write(MAGIC);
        out.write(ByteBuffer.allocate(4).putInt(id).array(), 0, 4);
        BinaryEncoder encoder = EncoderFactory.get().binaryEncoder(out, null);
        try {
            new GenericDatumWriter<Object>(schema).write(datum, encoder);
            encoder.flush();
        } catch (IOException e) {
            throw new IllegalStateException(e);
        } catch (AvroRuntimeException e) {  // a symbol its enum has not, ...
            throw UnwritableRecord.of(subject, e);
        }
        return Base64.getEncoder().encodeToString(out.toByteArray());
    }

    private static Schema parse(String text) {
        return PARSED.computeIfAbsent(text,
                t -> new Schema.Parser(NameValidator.NO_VALIDATION).parse(t));
    }

    // -- decoding ---------------------------------------------------------------------------------
    private static void write(JsonGenerator json, Schema schema, Object value) throws IOException {
        if (value == null) {
            json.writeNull();
            return;
        }
        LogicalType logical = schema.getLogicalType();
        switch (schema.getType()) {
            case UNION:
                int branch = GenericData.get().resolveUnion(schema, value);
                write(json, schema.getTypes().get(branch), value);
                return;
            case RECORD:
                IndexedRecord record = (IndexedRecord) value;
                json.writeStartObject();
                for (Schema.Field field : schema.getFields()) {
                    json.writeFieldName(field.name());
                    write(json, field.schema(), record.get(field.pos()));
                }
                json.writeEndObject();
                return;
            case MAP:
                json.writeStartObject();
                for (Map.Entry<?, ?> entry : ((Map<?, ?>) value).entrySet()) {
                    json.writeFieldName(String.valueOf(entry.getKey()));
                    write(json, schema.getValueType(), entry.getValue());
                }
                json.writeEndObject();
                return;
            case ARRAY:
                json.writeStartArray();
                for (Object element : (Iterable<?>) value) {
                    write(json, schema.getElementType(), element);
                }
                json.writeEndArray();
                return;
            case BYTES:
            case FIXED:
                byte[] bytes = bytesOf(value);
                if (logical instanceof LogicalTypes.Decimal) {
                    int scale = ((LogicalTypes.Decimal) logical).getScale();
                    json.writeNumber(new BigDecimal(new BigInteger(bytes), scale));
                } else {
                    json.writeString(Base64.getEncoder().encodeToString(bytes));
                }
                return;
            case LONG:
                long number = (Long) value;
                if (logical instanceof LogicalTypes.TimestampMicros
                        || logical instanceof LogicalTypes.TimeMicros
                        || logical instanceof LogicalTypes.LocalTimestampMicros) {
                    number = Math.floorDiv(number, 1000L);
                }
                json.writeNumber(number);
                return;
            case INT:
                json.writeNumber((Integer) value);
                return;
            case FLOAT:
                json.writeNumber((double) (Float) value);
                return;
            case DOUBLE:
                json.writeNumber((Double) value);
                return;
            case BOOLEAN:
                json.writeBoolean((Boolean) value);
                return;
            case NULL:
                json.writeNull();
                return;
            default:  // STRING, ENUM
                json.writeString(value.toString());
        }
    }

    private static byte[] bytesOf(Object value) {
        if (value instanceof GenericFixed) {
            return ((GenericFixed) value).bytes();
        }
        ByteBuffer buffer = ((ByteBuffer) value).duplicate();
        byte[] bytes = new byte[buffer.remaining()];
        buffer.get(bytes);
        return bytes;
    }

    // -- encoding ---------------------------------------------------------------------------------
    private static Object toAvro(Schema schema, JsonNode node, String path) {
        boolean absent = node == null || node.isNull() || node.isMissingNode();
        switch (schema.getType()) {
            case NULL:
                return null;
            case UNION:
                if (absent) {
                    if (schema.getTypes().stream().anyMatch(t -> t.getType() == Schema.Type.NULL)) {
                        return null;
                    }
                    throw new IllegalArgumentException(path + ": NULL where " + schema + " has none");
                }
                Schema chosen = null;
                for (Schema branch : schema.getTypes()) {
                    if (branch.getType() != Schema.Type.NULL && matches(branch, node)) {
                        chosen = branch;
                        break;
                    }
                }
                if (chosen == null) {  // a value of another kind is coerced into the first
                    chosen = schema.getTypes().stream()
                            .filter(t -> t.getType() != Schema.Type.NULL).findFirst()
                            .orElseThrow(() -> new IllegalArgumentException(path + ": " + node
                                    + " fits no branch of " + schema));
                }
                return toAvro(chosen, node, path);
            default:
                break;
        }
        if (absent) {
            throw new IllegalArgumentException(path + ": NULL for a non-optional " + schema);
        }
        LogicalType logical = schema.getLogicalType();
        switch (schema.getType()) {
            case RECORD:
                GenericData.Record record = new GenericData.Record(schema);
                for (Schema.Field field : schema.getFields()) {
                    JsonNode child = fieldOf(node, field.name());
                    // Connect's Struct gives a NULL field its schema's default: ksqlDB writes it
                    if ((child == null || child.isNull()) && field.hasDefaultValue()) {
                        record.put(field.pos(), GenericData.get().getDefaultValue(field));
                    } else {
                        record.put(field.pos(), toAvro(field.schema(), child,
                                path + "." + field.name()));
                    }
                }
                return record;
            case MAP:
                Map<String, Object> map = new HashMap<>();
                Iterator<Map.Entry<String, JsonNode>> entries = node.fields();
                while (entries.hasNext()) {
                    Map.Entry<String, JsonNode> entry = entries.next();
                    map.put(entry.getKey(), toAvro(schema.getValueType(), entry.getValue(),
                            path + "[" + entry.getKey() + "]"));
                }
                return map;
            case ARRAY:
                List<Object> list = new ArrayList<>();
                for (JsonNode element : node) {
                    list.add(toAvro(schema.getElementType(), element, path + "[]"));
                }
                return new GenericData.Array<>(schema, list);
            case BYTES:
            case FIXED:
                byte[] bytes;
                if (logical instanceof LogicalTypes.Decimal) {
                    BigDecimal decimal = node.isNumber() ? node.decimalValue()
                            : new BigDecimal(node.asText());
                    bytes = decimal.setScale(((LogicalTypes.Decimal) logical).getScale(),
                            RoundingMode.HALF_UP).unscaledValue().toByteArray();
                } else {
                    bytes = Base64.getMimeDecoder().decode(node.asText());
                }
                if (schema.getType() == Schema.Type.BYTES) {
                    return ByteBuffer.wrap(bytes);
                }
                return new GenericData.Fixed(schema, padded(bytes, schema.getFixedSize()));
            case STRING:
                return node.isValueNode() ? node.asText() : node.toString();
            case ENUM:
                return new GenericData.EnumSymbol(schema, node.asText());
            case INT:
                return node.isNumber() ? node.intValue() : Integer.parseInt(node.asText().trim());
            case LONG:
                long number = node.isNumber() ? node.longValue() : Long.parseLong(node.asText().trim());
                if (logical instanceof LogicalTypes.TimestampMicros
                        || logical instanceof LogicalTypes.TimeMicros
                        || logical instanceof LogicalTypes.LocalTimestampMicros) {
                    number *= 1000L;
                }
                return number;
            case FLOAT:
                return node.isNumber() ? node.floatValue() : Float.parseFloat(node.asText());
            case DOUBLE:
                return node.isNumber() ? node.doubleValue() : Double.parseDouble(node.asText());
            case BOOLEAN:
                return node.isBoolean() ? node.booleanValue() : Boolean.parseBoolean(node.asText());
            default:
                throw new IllegalArgumentException(path + ": cannot write " + schema);
        }
    }

    /** Whether the JSON {@code node} may be written as {@code schema}, a union's branch. */
    private static boolean matches(Schema schema, JsonNode node) {
        switch (schema.getType()) {
            case RECORD:
            case MAP:
                return node.isObject();
            case ARRAY:
                return node.isArray();
            case BOOLEAN:
                return node.isBoolean();
            case INT:
            case LONG:
                return node.isIntegralNumber();
            case FLOAT:
            case DOUBLE:
                return node.isNumber();
            case BYTES:
            case FIXED:
                return schema.getLogicalType() instanceof LogicalTypes.Decimal
                        ? node.isNumber() || node.isTextual() : node.isTextual();
            default:
                return node.isTextual();
        }
    }

    /** The field {@code name} of the object: the one of that exact name, else the first whose
     * name matches it ignoring case; null when there is none. */
    private static JsonNode fieldOf(JsonNode node, String name) {
        JsonNode exact = node.get(name);
        if (exact != null) {
            return exact;
        }
        Iterator<Map.Entry<String, JsonNode>> entries = node.fields();
        while (entries.hasNext()) {
            Map.Entry<String, JsonNode> entry = entries.next();
            if (entry.getKey().equalsIgnoreCase(name)) {
                return entry.getValue();
            }
        }
        return null;
    }

    private static byte[] padded(byte[] bytes, int size) {
        if (bytes.length >= size) {
            return bytes;
        }
        byte[] out = new byte[size];
        byte fill = bytes.length > 0 && bytes[0] < 0 ? (byte) -1 : 0;
        java.util.Arrays.fill(out, 0, size - bytes.length, fill);
        System.arraycopy(bytes, 0, out, size - bytes.length, bytes.length);
        return out;
    }
}

package io.metastore.protobuf;

import java.io.IOException;
import java.io.StringWriter;
import java.math.BigDecimal;
import java.math.BigInteger;
import java.time.DateTimeException;
import java.time.LocalDate;
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
import com.google.protobuf.ByteString;
import com.google.protobuf.DescriptorProtos.FileDescriptorProto;
import com.google.protobuf.DescriptorProtos.FileDescriptorSet;
import com.google.protobuf.Descriptors.Descriptor;
import com.google.protobuf.Descriptors.DescriptorValidationException;
import com.google.protobuf.Descriptors.EnumValueDescriptor;
import com.google.protobuf.Descriptors.FieldDescriptor;
import com.google.protobuf.Descriptors.FileDescriptor;
import com.google.protobuf.DynamicMessage;
import com.google.protobuf.InvalidProtocolBufferException;
import com.google.protobuf.Message;

/**
 * ksqlDB's PROTOBUF_NOSR records (plain serialized Protobuf messages, no schema registry framing)
 * to and from ksqlDB's JSON representation of the same values, for Spark SQL's
 * {@code java_method}, which passes and returns only strings.
 *
 * <p>A schema is {@code <root message full name>:<base64 of a FileDescriptorSet>}, the files in
 * dependency order, as {@code metastore.protobuf.schema} derives it from a source's columns.
 * {@link #decode} turns a record (base64) into JSON text, {@link #encode} JSON text into a record
 * (base64); a NULL in is a NULL out (which {@code java_method} returns as the text {@code null}). The JSON is the one ksqlDB's JSON format writes: TIMESTAMP
 * ({@code google.protobuf.Timestamp}) as epoch milliseconds, DATE ({@code google.type.Date}) as
 * epoch days, TIME ({@code google.type.TimeOfDay}) as milliseconds of the day, DECIMAL
 * ({@code confluent.type.Decimal}) as a number, BYTES as base64, a {@code google.protobuf.*Value}
 * wrapper as its value. Reading follows ksqlDB's (Confluent's ProtobufData): a scalar field
 * without presence that is absent reads as its default ({@code 0}, {@code ""}, {@code false}), a
 * repeated or map field as empty, an absent message field or proto3 {@code optional} field as
 * NULL. Writing skips NULLs. A record that does not parse decodes to NULL.
 */
public final class ProtobufNoSrCodec {
    private static final Map<String, Descriptor> SCHEMAS = new ConcurrentHashMap<>();
    private static final ObjectMapper MAPPER = JsonMapper.builder()
            .enable(JsonReadFeature.ALLOW_NON_NUMERIC_NUMBERS)
            .enable(DeserializationFeature.USE_BIG_DECIMAL_FOR_FLOATS)
            .enable(DeserializationFeature.USE_BIG_INTEGER_FOR_INTS)
            .build();
    private static final JsonFactory JSON = MAPPER.getFactory();
    private static final long MILLIS_PER_DAY = 86_400_000L;

    private ProtobufNoSrCodec() {
    }

    /** The record {@code base64} (a message of {@code schema}) as JSON text, or NULL. */
    public static String decode(String schema, String base64) {
        if (base64 == null) {
            return null;
        }
        Descriptor root = descriptor(schema);
        DynamicMessage message;
        try {
            message = DynamicMessage.parseFrom(root, Base64.getMimeDecoder().decode(base64));
        } catch (InvalidProtocolBufferException | IllegalArgumentException e) {
            return null;
        }
        StringWriter out = new StringWriter();
        try (JsonGenerator json = JSON.createGenerator(out)) {
            writeMessage(json, message);
        } catch (IOException | ArithmeticException | DateTimeException e) {
            return null;
        }
        return out.toString();
    }

    /** The JSON text {@code text} as a record of {@code schema}, in base64, or NULL. */
    public static String encode(String schema, String text) {
        if (text == null) {
            return null;
        }
        Descriptor root = descriptor(schema);
        JsonNode node;
        try {
            node = MAPPER.readTree(text);
        } catch (IOException e) {
            throw new IllegalArgumentException("not JSON: " + text, e);
        }
        if (node == null || node.isNull()) {
            return null;
        }
        return Base64.getEncoder().encodeToString(toMessage(root, node).toByteArray());
    }

    // -- schemas ----------------------------------------------------------------------------------
    static Descriptor descriptor(String schema) {
        return SCHEMAS.computeIfAbsent(schema, ProtobufNoSrCodec::build);
    }

    private static Descriptor build(String schema) {
        int colon = schema.indexOf(':');
        if (colon < 0) {
            throw new IllegalArgumentException("not a schema: " + schema);
        }
        String name = schema.substring(0, colon);
        try {
            FileDescriptorSet set = FileDescriptorSet.parseFrom(
                    Base64.getDecoder().decode(schema.substring(colon + 1)));
            Map<String, FileDescriptor> files = new HashMap<>();
            for (FileDescriptorProto file : set.getFileList()) {
                FileDescriptor[] dependencies = new FileDescriptor[file.getDependencyCount()];
                for (int i = 0; i < dependencies.length; i++) {
                    dependencies[i] = files.get(file.getDependency(i));
                }
                FileDescriptor built = FileDescriptor.buildFrom(file, dependencies);
                files.put(file.getName(), built);
                String prefix = built.getPackage().isEmpty() ? "" : built.getPackage() + ".";
                for (Descriptor message : built.getMessageTypes()) {
                    if (name.equals(prefix + message.getName())) {
                        return message;
                    }
                }
            }
        } catch (InvalidProtocolBufferException | DescriptorValidationException e) {
            throw new IllegalArgumentException("invalid schema for " + name, e);
        }
        throw new IllegalArgumentException("no message " + name + " in the schema");
    }

    // -- decoding ---------------------------------------------------------------------------------
    private static void writeMessage(JsonGenerator json, Message message) throws IOException {
        Descriptor type = message.getDescriptorForType();
        switch (type.getFullName()) {
            case "google.protobuf.Timestamp" -> {
                long seconds = ((Number) field(message, "seconds")).longValue();
                int nanos = ((Number) field(message, "nanos")).intValue();
                json.writeNumber(Math.addExact(Math.multiplyExact(seconds, 1000L), nanos / 1_000_000));
            }
            case "google.type.Date" -> json.writeNumber(LocalDate.of(
                    ((Number) field(message, "year")).intValue(),
                    ((Number) field(message, "month")).intValue(),
                    ((Number) field(message, "day")).intValue()).toEpochDay());
            case "google.type.TimeOfDay" -> json.writeNumber(
                    ((((Number) field(message, "hours")).longValue() * 60
                            + ((Number) field(message, "minutes")).longValue()) * 60
                            + ((Number) field(message, "seconds")).longValue()) * 1000
                            + ((Number) field(message, "nanos")).longValue() / 1_000_000);
            case "confluent.type.Decimal" -> {
                byte[] unscaled = ((ByteString) field(message, "value")).toByteArray();
                BigInteger value = unscaled.length == 0 ? BigInteger.ZERO : new BigInteger(unscaled);
                json.writeNumber(new BigDecimal(value, ((Number) field(message, "scale")).intValue())
                        .toPlainString());
            }
            default -> {
                if (isWrapper(type)) {
                    FieldDescriptor value = type.findFieldByName("value");
                    writeValue(json, value, message.getField(value));
                    return;
                }
                json.writeStartObject();
                for (FieldDescriptor field : type.getFields()) {
                    json.writeFieldName(field.getName());
                    writeField(json, message, field);
                }
                json.writeEndObject();
            }
        }
    }

    private static Object field(Message message, String name) {
        return message.getField(message.getDescriptorForType().findFieldByName(name));
    }

    private static boolean isWrapper(Descriptor type) {
        return type.getFile().getPackage().equals("google.protobuf")
                && type.getName().endsWith("Value") && type.getFields().size() == 1
                && type.getFields().get(0).getName().equals("value");
    }

    private static void writeField(JsonGenerator json, Message message, FieldDescriptor field)
            throws IOException {
        if (field.isMapField()) {
            Descriptor entry = field.getMessageType();
            FieldDescriptor key = entry.findFieldByNumber(1);
            FieldDescriptor value = entry.findFieldByNumber(2);
            json.writeStartObject();
            for (Object item : (List<?>) message.getField(field)) {
                Message pair = (Message) item;
                json.writeFieldName(String.valueOf(scalar(key, pair.getField(key))));
                if (value.getJavaType() == FieldDescriptor.JavaType.MESSAGE && !pair.hasField(value)) {
                    json.writeNull();
                } else {
                    writeValue(json, value, pair.getField(value));
                }
            }
            json.writeEndObject();
        } else if (field.isRepeated()) {
            json.writeStartArray();
            for (Object item : (List<?>) message.getField(field)) {
                writeValue(json, field, item);
            }
            json.writeEndArray();
        } else if (field.hasPresence() && !message.hasField(field)) {
            json.writeNull();  // an absent message, or an absent proto3 optional scalar
        } else {
            writeValue(json, field, message.getField(field));
        }
    }

    private static void writeValue(JsonGenerator json, FieldDescriptor field, Object value)
            throws IOException {
        if (field.getJavaType() == FieldDescriptor.JavaType.MESSAGE) {
            writeMessage(json, (Message) value);
            return;
        }
        Object plain = scalar(field, value);
        if (plain instanceof Integer number) {
            json.writeNumber(number);
        } else if (plain instanceof Long number) {
            json.writeNumber(number);
        } else if (plain instanceof BigInteger number) {
            json.writeNumber(number);
        } else if (plain instanceof Float number) {
            // a float is a DOUBLE column, widened as Java widens it (1.1234f reads
            // 1.1233999729156494), as ksqlDB's FLOAT32 schema reads it
            json.writeNumber(number.doubleValue());
        } else if (plain instanceof Double number) {
            json.writeNumber(number);
        } else if (plain instanceof Boolean bool) {
            json.writeBoolean(bool);
        } else {
            json.writeString(String.valueOf(plain));
        }
    }

    /** A scalar field's value as JSON holds it: unsigned integers as their unsigned value,
     * bytes as base64, an enum as its name. */
    private static Object scalar(FieldDescriptor field, Object value) {
        return switch (field.getType()) {
            case UINT32, FIXED32 -> Integer.toUnsignedLong((Integer) value);
            case UINT64, FIXED64 -> new BigInteger(Long.toUnsignedString((Long) value));
            case BYTES -> Base64.getEncoder().encodeToString(((ByteString) value).toByteArray());
            case ENUM -> ((EnumValueDescriptor) value).getName();
            default -> value;
        };
    }

    // -- encoding ---------------------------------------------------------------------------------
    private static Message toMessage(Descriptor type, JsonNode node) {
        DynamicMessage.Builder builder = DynamicMessage.newBuilder(type);
        switch (type.getFullName()) {
            case "google.protobuf.Timestamp" -> {
                long millis = node.asLong();
                set(builder, "seconds", Math.floorDiv(millis, 1000L));
                set(builder, "nanos", (int) Math.floorMod(millis, 1000L) * 1_000_000);
            }
            case "google.type.Date" -> {
                LocalDate date = LocalDate.ofEpochDay(node.asLong());
                set(builder, "year", date.getYear());
                set(builder, "month", date.getMonthValue());
                set(builder, "day", date.getDayOfMonth());
            }
            case "google.type.TimeOfDay" -> {
                long millis = Math.floorMod(node.asLong(), MILLIS_PER_DAY);
                set(builder, "hours", (int) (millis / 3_600_000L));
                set(builder, "minutes", (int) (millis / 60_000L % 60));
                set(builder, "seconds", (int) (millis / 1000L % 60));
                set(builder, "nanos", (int) (millis % 1000L) * 1_000_000);
            }
            case "confluent.type.Decimal" -> {
                BigDecimal decimal = node.isNumber() ? node.decimalValue() : new BigDecimal(node.asText());
                set(builder, "value", ByteString.copyFrom(decimal.unscaledValue().toByteArray()));
                set(builder, "precision", decimal.precision());
                set(builder, "scale", decimal.scale());
            }
            default -> {
                if (isWrapper(type)) {
                    FieldDescriptor value = type.findFieldByName("value");
                    builder.setField(value, toScalar(value, node));
                } else {
                    fill(builder, type, node);
                }
            }
        }
        return builder.build();
    }

    private static void set(DynamicMessage.Builder builder, String name, Object value) {
        FieldDescriptor field = builder.getDescriptorForType().findFieldByName(name);
        if (!value.equals(field.getDefaultValue())) {  // proto3: a default is not written
            builder.setField(field, value);
        }
    }

    private static void fill(DynamicMessage.Builder builder, Descriptor type, JsonNode node) {
        if (!node.isObject()) {
            throw new IllegalArgumentException(type.getFullName() + " needs a JSON object: " + node);
        }
        Map<String, JsonNode> members = new HashMap<>();
        for (Iterator<Map.Entry<String, JsonNode>> it = node.fields(); it.hasNext(); ) {
            Map.Entry<String, JsonNode> member = it.next();
            members.putIfAbsent(member.getKey().toUpperCase(), member.getValue());
        }
        for (FieldDescriptor field : type.getFields()) {
            JsonNode value = node.has(field.getName()) ? node.get(field.getName())
                    : members.get(field.getName().toUpperCase());
            if (value == null || value.isNull()) {
                continue;
            }
            if (field.isMapField()) {
                Descriptor entry = field.getMessageType();
                FieldDescriptor key = entry.findFieldByNumber(1);
                FieldDescriptor item = entry.findFieldByNumber(2);
                for (Iterator<Map.Entry<String, JsonNode>> it = value.fields(); it.hasNext(); ) {
                    Map.Entry<String, JsonNode> pair = it.next();
                    DynamicMessage.Builder entryBuilder = DynamicMessage.newBuilder(entry);
                    entryBuilder.setField(key, toScalar(key, MAPPER.getNodeFactory().textNode(pair.getKey())));
                    if (!pair.getValue().isNull()) {
                        entryBuilder.setField(item, toValue(item, pair.getValue()));
                    }
                    builder.addRepeatedField(field, entryBuilder.build());
                }
            } else if (field.isRepeated()) {
                for (JsonNode element : value) {
                    if (!element.isNull()) {  // Protobuf has no NULL element
                        builder.addRepeatedField(field, toValue(field, element));
                    }
                }
            } else {
                Object converted = toValue(field, value);
                if (field.hasPresence() || !converted.equals(field.getDefaultValue())) {
                    builder.setField(field, converted);
                }
            }
        }
    }

    private static Object toValue(FieldDescriptor field, JsonNode node) {
        if (field.getJavaType() == FieldDescriptor.JavaType.MESSAGE) {
            return toMessage(field.getMessageType(), node);
        }
        return toScalar(field, node);
    }

    private static Object toScalar(FieldDescriptor field, JsonNode node) {
        return switch (field.getType()) {
            case INT32, SINT32, SFIXED32 -> node.isNumber() ? node.intValue() : Integer.parseInt(node.asText());
            case UINT32, FIXED32 -> (int) (node.isNumber() ? node.longValue() : Long.parseLong(node.asText()));
            case INT64, SINT64, SFIXED64, UINT64, FIXED64 ->
                    node.isNumber() ? node.longValue() : Long.parseLong(node.asText());
            case DOUBLE -> node.isNumber() ? node.doubleValue() : Double.parseDouble(node.asText());
            case FLOAT -> node.isNumber() ? node.floatValue() : Float.parseFloat(node.asText());
            case BOOL -> node.isBoolean() ? node.booleanValue() : Boolean.parseBoolean(node.asText());
            case STRING -> node.isTextual() ? node.textValue() : node.toString();
            case BYTES -> ByteString.copyFrom(Base64.getMimeDecoder().decode(node.asText()));
            case ENUM -> field.getEnumType().findValueByName(node.asText());
            default -> throw new IllegalArgumentException("unsupported field " + field.getFullName());
        };
    }
}

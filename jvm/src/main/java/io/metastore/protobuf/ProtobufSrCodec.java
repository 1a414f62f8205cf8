package io.metastore.protobuf;

import java.io.ByteArrayOutputStream;
import java.util.Base64;

import io.metastore.avro.RegistryCalls;

/**
 * ksqlDB's PROTOBUF records: Confluent's wire format (a zero magic byte, the writer schema's
 * 4-byte registry id, the message indexes of the record's message in its schema, then the
 * message), for Spark SQL's {@code java_method}.
 *
 * <p>The message itself is read and written as a PROTOBUF_NOSR record ({@link ProtobufNoSrCodec})
 * of the schema ksqlDB derives from the columns: Protobuf is read by field number, so a writer's
 * schema that numbers its fields as the derived one does reads the same. {@link #decode} skips
 * the header and the indexes (a record without the magic byte decodes to NULL);
 * {@link #encode} registers the schema's {@code .proto} text under the subject and writes its
 * id, then the root message's index among its file's messages.
 */
public final class ProtobufSrCodec {
    private static final int HEADER = 5;

    private ProtobufSrCodec() {
    }

    /** The record {@code base64} (a framed message of {@code schema}) as JSON text, or NULL. */
    public static String decode(String schema, String base64) {
        if (base64 == null) {
            return null;
        }
        byte[] bytes = Base64.getMimeDecoder().decode(base64);
        if (bytes.length < HEADER + 1 || bytes[0] != 0) {
            return null;
        }
        int position = HEADER;
        long[] count = varint(bytes, position);
        if (count == null) {
            return null;
        }
        position = (int) count[1];
        long indexes = (count[0] >>> 1) ^ -(count[0] & 1);  // zig-zag; 0 stands for [0]
        for (long i = 0; i < indexes; i++) {
            long[] index = varint(bytes, position);
            if (index == null) {
                return null;
            }
            position = (int) index[1];
        }
        byte[] message = java.util.Arrays.copyOfRange(bytes, position, bytes.length);
        return ProtobufNoSrCodec.decode(schema, Base64.getEncoder().encodeToString(message));
    }

    /** The JSON text as a framed record of {@code schema}, its {@code protoText} registered
     * under {@code subject} on the session's registry; NULL for NULL. */
    public static String encode(String schema, String subject, String protoText, String text) {
        return encode(schema, subject, protoText, null, text);
    }

    /** {@link #encode} of a {@code .proto} text that imports the registered schemas
     * {@code referencesJson} names (see {@link RegistryCalls#register}). */
    public static String encode(String schema, String subject, String protoText,
                                String referencesJson, String text) {
        return text == null ? null : encodeWith(RegistryCalls.sessionUrl(), schema, subject,
                protoText, referencesJson, text);
    }

    /** {@link #encode} on the registry at {@code url}. */
    public static String encodeWith(String url, String schema, String subject, String protoText,
                                    String text) {
        return encodeWith(url, schema, subject, protoText, null, text);
    }

    /** {@link #encode} on the registry at {@code url}, of a text with references. */
    public static String encodeWith(String url, String schema, String subject, String protoText,
                                    String referencesJson, String text) {
        String body = ProtobufNoSrCodec.encode(schema, text);
        if (body == null) {
            return null;
        }
        byte[] header = Base64.getDecoder().decode(
                RegistryCalls.headerWith(url, "PROTOBUF", subject, protoText, referencesJson));
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        out.write(header, 0, header.length);
        int index = ProtobufNoSrCodec.descriptor(schema).getIndex();  // a file's own message
        if (index != 0) {
            writeVarint(out, 2);  // zig-zag of the count, 1
        }
        writeVarint(out, (long) index << 1);
        byte[] message = Base64.getDecoder().decode(body);
        out.write(message, 0, message.length);
        return Base64.getEncoder().encodeToString(out.toByteArray());
    }

    private static void writeVarint(ByteArrayOutputStream out, long number) {
        while (number > 0x7f) {
            out.write((int) ((number & 0x7f) | 0x80));
            number >>>= 7;
        }
        out.write((int) number);
    }

    /** The varint at {@code position}, and the position after it; null when it runs out. */
    private static long[] varint(byte[] bytes, int position) {
        long value = 0;
        for (int shift = 0; shift < 64; shift += 7) {
            if (position >= bytes.length) {
                return null;
            }
            byte b = bytes[position++];
            value |= (long) (b & 0x7f) << shift;
            if ((b & 0x80) == 0) {
                return new long[] {value, position};
            }
        }
        return null;
    }
}

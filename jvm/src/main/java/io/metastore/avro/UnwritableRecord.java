package io.metastore.avro;

import org.apache.kafka.common.errors.SerializationException;

/**
 * A record an AVRO schema cannot hold (a NULL for a field of a registered schema without a
 * NULL branch or a default, a symbol its enum has not): the exception ksqlDB's serializer
 * throws, which fails the query, naming the subject the record was to be written under so that
 * the node's processing log can tell the key's failure from the value's. (The PROTOBUF writer
 * skips a NULL, as Protobuf has none: no value fails it.)
 */
public final class UnwritableRecord {
    /** The prefix the node reads the subject after; the detail follows {@code ": "}. */
    public static final String PREFIX = "Error serializing a record of subject ";

    private UnwritableRecord() {
    }

    /** The failure to write a record under {@code subject}, for {@code cause}. */
    public static SerializationException of(String subject, RuntimeException cause) {
        return new SerializationException(PREFIX + subject + ": " + cause.getMessage(), cause);
    }
}

package io.metastore.kafka;

import java.nio.ByteBuffer;
import java.util.Map;

import org.apache.kafka.clients.producer.ProducerInterceptor;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeaders;

/**
 * Gives a record the timestamp its {@code metastore.timestamp} header carries (8 bytes,
 * big-endian epoch milliseconds) and removes that header.
 *
 * <p>Spark's Kafka sink cannot set a record's timestamp; a persistent query writes each sink
 * record with the timestamp of the source record it came from (ksqlDB's ROWTIME) through this
 * interceptor, configured as the sink producer's {@code interceptor.classes}. A record without
 * the header is sent unchanged.
 */
public final class RecordTimestampInterceptor implements ProducerInterceptor<byte[], byte[]> {
    public static final String HEADER = "metastore.timestamp";

    @Override
    public ProducerRecord<byte[], byte[]> onSend(ProducerRecord<byte[], byte[]> record) {
        Header header = record.headers().lastHeader(HEADER);
        if (header == null || header.value() == null || header.value().length != Long.BYTES) {
            return record;
        }
        long timestamp = ByteBuffer.wrap(header.value()).getLong();
        RecordHeaders headers = new RecordHeaders();
        for (Header other : record.headers()) {
            if (!HEADER.equals(other.key())) {
                headers.add(other);
            }
        }
        return new ProducerRecord<>(record.topic(), record.partition(),
                timestamp < 0 ? null : timestamp, record.key(), record.value(), headers);
    }

    @Override
    public void onAcknowledgement(RecordMetadata metadata, Exception exception) {
    }

    @Override
    public void close() {
    }

    @Override
    public void configure(Map<String, ?> configs) {
    }
}

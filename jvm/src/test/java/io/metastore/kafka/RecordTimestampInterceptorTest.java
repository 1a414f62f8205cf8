package io.metastore.kafka;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.junit.jupiter.api.Test;

/** A sink record takes its source record's time from the header the query writes. */
class RecordTimestampInterceptorTest {
    private static final byte[] KEY = "k".getBytes(StandardCharsets.UTF_8);
    private static final byte[] VALUE = "v".getBytes(StandardCharsets.UTF_8);

    private static ProducerRecord<byte[], byte[]> record(byte[] timestamp) {
        RecordHeaders headers = new RecordHeaders();
        headers.add("trace", new byte[] {1});
        if (timestamp != null) {
            headers.add(RecordTimestampInterceptor.HEADER, timestamp);
        }
        return new ProducerRecord<>("sink", 2, null, KEY, VALUE, headers);
    }

    private static byte[] millis(long value) {
        return ByteBuffer.allocate(Long.BYTES).putLong(value).array();
    }

    @Test
    void theHeadersTimeBecomesTheRecordsAndTheHeaderGoes() {
        ProducerRecord<byte[], byte[]> sent =
                new RecordTimestampInterceptor().onSend(record(millis(1_700_000_000_123L)));
        assertEquals(1_700_000_000_123L, sent.timestamp());
        assertEquals(2, sent.partition());
        assertArrayEquals(KEY, sent.key());
        assertArrayEquals(VALUE, sent.value());
        assertNull(sent.headers().lastHeader(RecordTimestampInterceptor.HEADER));
        assertArrayEquals(new byte[] {1}, sent.headers().lastHeader("trace").value());
    }

    @Test
    void aNegativeTimeLeavesTheTimeToTheProducer() {
        ProducerRecord<byte[], byte[]> sent =
                new RecordTimestampInterceptor().onSend(record(millis(-1)));
        assertNull(sent.timestamp());
        assertNull(sent.headers().lastHeader(RecordTimestampInterceptor.HEADER));
    }

    @Test
    void aRecordWithoutTheHeaderOrWithAMalformedOneIsSentUnchanged() {
        ProducerRecord<byte[], byte[]> plain = record(null);
        assertSame(plain, new RecordTimestampInterceptor().onSend(plain));
        ProducerRecord<byte[], byte[]> malformed = record(new byte[] {1, 2, 3});
        assertSame(malformed, new RecordTimestampInterceptor().onSend(malformed));
    }
}

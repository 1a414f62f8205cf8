package io.metastore.kafka;

import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.ListConsumerGroupOffsetsOptions;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;

/**
 * Writes each micro-batch of an exactly-once persistent query to its sink topic in one Kafka
 * transaction that also commits the micro-batch's id.
 *
 * <p>The query's transactional id is stable (the service's and the query's), so a producer
 * that starts for it fences every earlier one, wherever it runs, and aborts the transaction
 * that one left open. The same transaction that writes micro-batch {@code n}'s records commits
 * {@code n + 1} as the offset of the sink's partition 0 in the consumer group named by the
 * transactional id, with the id of the query's Spark checkpoint as the offset's metadata (a
 * mark of another checkpoint says nothing: micro-batch ids start over with a checkpoint): the
 * records and the mark are visible together or not at all. Spark runs a
 * micro-batch again, after a crash, with the same id and the same source offsets; a
 * micro-batch whose mark is committed is skipped (its records were written, and the state its
 * tasks wrote while they ran is in the checkpoint), so a consumer reading
 * {@code read_committed} sees each record once.
 * The mark is read when a producer starts (with {@code requireStable}: after the fencing, no
 * transaction is pending) and then kept: no other producer can commit for the query while this
 * one is not fenced.
 *
 * <p>A micro-batch's rows have Spark's Kafka sink columns {@code key}, {@code value} and
 * {@code headers}; the producer's configuration is the query's sink options (its interceptor
 * gives each record its timestamp, its partitioner a windowed key's partition).
 */
public final class TransactionalSink {
    private static final Map<String, Writer> WRITERS = new ConcurrentHashMap<>();
    /** How long a micro-batch's transaction may stay open (the broker allows 15 minutes). */
    private static final String TRANSACTION_TIMEOUT_MS = "300000";

    private TransactionalSink() {
    }

    /**
     * Writes micro-batch {@code batchId}'s {@code rows} to {@code topic} with the producer of
     * {@code transactionalId}: the records written, or -1 when an earlier attempt committed the
     * micro-batch.
     */
    public static long write(Dataset<Row> rows, Map<String, String> config, String topic,
                             String transactionalId, String checkpointId, long batchId) {
        Writer writer = WRITERS.get(transactionalId);
        if (writer == null) {  // built outside the map: a producer's start may take a while
            Writer started = new Writer(config, topic, transactionalId, checkpointId);
            writer = WRITERS.putIfAbsent(transactionalId, started);
            if (writer == null) {
                writer = started;
            } else {
                started.close();
            }
        }
        synchronized (writer) {
            try {
                return writer.write(rows, batchId);
            } catch (Exception e) {  // Spark's own failures are checked exceptions in Java
                WRITERS.remove(transactionalId, writer);
                writer.close();  // the next attempt starts a producer, which fences this one
                throw e;
            }
        }
    }

    /** The next micro-batch id the query of {@code transactionalId}, from the checkpoint
     * {@code checkpointId}, has not committed (0: none). */
    public static long committed(Map<String, String> config, String topic, String transactionalId,
                                 String checkpointId) {
        try (Admin admin = Admin.create(adminConfig(config))) {
            return markOf(admin, transactionalId, new TopicPartition(topic, 0), checkpointId);
        }
    }

    /** Closes the producer of {@code transactionalId}, if this JVM has one. */
    public static void close(String transactionalId) {
        Writer writer = WRITERS.remove(transactionalId);
        if (writer != null) {
            synchronized (writer) {
                writer.close();
            }
        }
    }

    private static Map<String, Object> adminConfig(Map<String, String> config) {
        Map<String, Object> admin = new HashMap<>();
        for (Map.Entry<String, String> entry : config.entrySet()) {
            if (AdminClientConfig.configNames().contains(entry.getKey())) {
                admin.put(entry.getKey(), entry.getValue());
            }
        }
        return admin;
    }

    /** The next micro-batch the mark says, when the checkpoint it names is {@code checkpointId}:
     * a mark of another checkpoint (the query's checkpoint started over, its micro-batch ids
     * from 0 again) says nothing. */
    private static long markOf(Admin admin, String group, TopicPartition mark,
                               String checkpointId) {
        try {
            Map<TopicPartition, OffsetAndMetadata> offsets = admin.listConsumerGroupOffsets(
                    group, new ListConsumerGroupOffsetsOptions().requireStable(true))
                    .partitionsToOffsetAndMetadata().get();
            OffsetAndMetadata committed = offsets.get(mark);
            return committed == null || !checkpointId.equals(committed.metadata())
                    ? 0 : committed.offset();
        } catch (ExecutionException e) {
            throw new KafkaException("reading the committed micro-batch of " + group, e.getCause());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new KafkaException("interrupted reading the committed micro-batch", e);
        }
    }

    private static final class Writer {
        private final KafkaProducer<byte[], byte[]> producer;
        private final String topic;
        private final String group;
        private final TopicPartition mark;
        private final String checkpointId;
        private long next;

        Writer(Map<String, String> config, String topic, String transactionalId,
               String checkpointId) {
            Map<String, Object> settings = new HashMap<>(config);
            settings.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, transactionalId);
            settings.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
            settings.put(ProducerConfig.ACKS_CONFIG, "all");
            // a micro-batch of up to 200,000 records is computed while its transaction is
            // open: Kafka's default of 60 s would abort a slow one, and the retry again
            settings.putIfAbsent(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG,
                    TRANSACTION_TIMEOUT_MS);
            settings.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class);
            settings.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class);
            this.topic = topic;
            this.group = transactionalId;
            this.mark = new TopicPartition(topic, 0);
            this.checkpointId = checkpointId;
            this.producer = new KafkaProducer<>(settings);
            try {
                producer.initTransactions();  // fences every earlier producer of the query
                try (Admin admin = Admin.create(adminConfig(config))) {
                    this.next = markOf(admin, group, mark, checkpointId);
                }
            } catch (RuntimeException e) {
                producer.close();
                throw e;
            }
        }

        long write(Dataset<Row> rows, long batchId) {
            if (batchId < next) {
                return -1;
            }
            long written = 0;
            producer.beginTransaction();
            try {
                Columns columns = new Columns(rows.schema().fieldNames());
                Iterator<Row> each = rows.toLocalIterator();
                while (each.hasNext()) {
                    producer.send(columns.record(topic, each.next()));
                    written++;
                }
                producer.sendOffsetsToTransaction(
                        Map.of(mark, new OffsetAndMetadata(batchId + 1, checkpointId)),
                        new ConsumerGroupMetadata(group));
                producer.commitTransaction();
            } catch (Exception e) {  // Spark's own failures are checked exceptions in Java
                try {
                    producer.abortTransaction();
                } catch (RuntimeException ignored) {
                    // fenced or failed: the producer is closed, and the next one aborts it
                }
                throw e;
            }
            next = batchId + 1;
            return written;
        }

        /** A key or value as Spark's Kafka sink takes it: binary, or a string in UTF-8. */
        private static byte[] bytesOf(Object value) {
            if (value == null || value instanceof byte[]) {
                return (byte[]) value;
            }
            if (value instanceof String) {
                return ((String) value).getBytes(java.nio.charset.StandardCharsets.UTF_8);
            }
            throw new IllegalArgumentException("a sink key or value is binary or a string, not "
                    + value.getClass().getName());
        }

        void close() {
            producer.close(java.time.Duration.ofSeconds(5));
        }
    }

    /** Where a micro-batch's rows hold Spark's Kafka sink columns (found once a batch). */
    private static final class Columns {
        private final int key;
        private final int value;
        private final int headers;

        Columns(String[] names) {
            List<String> columns = List.of(names);
            this.key = columns.indexOf("key");
            this.value = columns.indexOf("value");
            this.headers = columns.indexOf("headers");
        }

        ProducerRecord<byte[], byte[]> record(String topic, Row row) {
            RecordHeaders recordHeaders = new RecordHeaders();
            if (headers >= 0 && !row.isNullAt(headers)) {
                List<Row> given = row.getList(headers);
                for (Row header : given) {
                    recordHeaders.add(header.getString(0), (byte[]) header.get(1));
                }
            }
            byte[] keyBytes = key >= 0 ? Writer.bytesOf(row.get(key)) : null;
            byte[] valueBytes = Writer.bytesOf(row.get(value));
            return new ProducerRecord<>(topic, null, null, keyBytes, valueBytes, recordHeaders);
        }
    }
}

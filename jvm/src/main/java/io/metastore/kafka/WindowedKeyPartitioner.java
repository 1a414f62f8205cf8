package io.metastore.kafka;

import java.util.Arrays;
import java.util.Map;
import java.util.concurrent.ThreadLocalRandom;

import org.apache.kafka.clients.producer.Partitioner;
import org.apache.kafka.common.Cluster;
import org.apache.kafka.common.utils.Utils;

/**
 * Puts a windowed key's record in the partition of its key without the window, as Kafka
 * Streams' {@code WindowedStreamPartitioner} does for every sink whose key serializer is
 * windowed (a ksqlDB windowed table's or stream's): all windows of a key in one partition, in
 * the order they were written.
 *
 * <p>Spark's Kafka sink would hash the whole key, window included, and scatter a key's windows
 * over the partitions. A query writing a windowed sink configures this class as its producer's
 * {@code partitioner.class}, with {@value #WINDOW_BYTES} the bytes of the window its keys end
 * with: 8 (the start) for TUMBLING and HOPPING windows, 16 (end and start) for SESSION
 * windows. The rest is hashed as Kafka's default partitioner hashes a key (murmur2). A record
 * without a key goes to a partition drawn at random.
 */
public final class WindowedKeyPartitioner implements Partitioner {
    public static final String WINDOW_BYTES = "metastore.window.key.bytes";

    private int windowBytes;

    @Override
    public void configure(Map<String, ?> configs) {
        Object configured = configs.get(WINDOW_BYTES);
        windowBytes = configured == null ? 0 : Integer.parseInt(configured.toString().trim());
    }

    @Override
    public int partition(String topic, Object key, byte[] keyBytes, Object value,
                         byte[] valueBytes, Cluster cluster) {
        int partitions = cluster.partitionsForTopic(topic).size();
        if (keyBytes == null) {
            return ThreadLocalRandom.current().nextInt(partitions);
        }
        byte[] unwindowed = Arrays.copyOf(keyBytes, Math.max(0, keyBytes.length - windowBytes));
        return Utils.toPositive(Utils.murmur2(unwindowed)) % partitions;
    }

    @Override
    public void close() {
    }
}

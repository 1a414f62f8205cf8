package io.metastore.kafka;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import org.apache.kafka.common.Cluster;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.utils.Utils;
import org.junit.jupiter.api.Test;

/** A windowed key's record goes to its unwindowed key's partition, as Kafka Streams puts it. */
class WindowedKeyPartitionerTest {
    private static final String TOPIC = "windowed";
    private static final int PARTITIONS = 6;

    private static Cluster cluster() {
        Node node = new Node(0, "localhost", 9092);
        List<PartitionInfo> partitions = new ArrayList<>();
        for (int p = 0; p < PARTITIONS; p++) {
            partitions.add(new PartitionInfo(TOPIC, p, node, new Node[] {node}, new Node[] {node}));
        }
        return new Cluster("c", List.of(node), partitions, Collections.emptySet(),
                           Collections.emptySet());
    }

    private static WindowedKeyPartitioner partitioner(int windowBytes) {
        WindowedKeyPartitioner partitioner = new WindowedKeyPartitioner();
        partitioner.configure(Map.of(WindowedKeyPartitioner.WINDOW_BYTES, " " + windowBytes));
        return partitioner;
    }

    private static byte[] windowed(String key, long... window) {
        byte[] keyBytes = key.getBytes(StandardCharsets.UTF_8);
        ByteBuffer buffer = ByteBuffer.allocate(keyBytes.length + Long.BYTES * window.length);
        buffer.put(keyBytes);
        for (long bound : window) {
            buffer.putLong(bound);
        }
        return buffer.array();
    }

    private static int unwindowedPartition(String key) {
        return Utils.toPositive(Utils.murmur2(key.getBytes(StandardCharsets.UTF_8))) % PARTITIONS;
    }

    @Test
    void everyWindowOfAKeyGoesWhereTheKeyAloneWould() {
        WindowedKeyPartitioner tumbling = partitioner(8);
        WindowedKeyPartitioner session = partitioner(16);
        for (String key : List.of("alice", "bob", "carol", "dave", "", "ü")) {
            for (long start = 0; start < 5 * 60_000; start += 60_000) {
                assertEquals(unwindowedPartition(key), tumbling.partition(
                        TOPIC, null, windowed(key, start), null, null, cluster()));
                assertEquals(unwindowedPartition(key), session.partition(
                        TOPIC, null, windowed(key, start + 30_000, start), null, null, cluster()));
            }
        }
    }

    @Test
    void aKeyShorterThanItsWindowIsHashedAsAnEmptyKey() {
        assertEquals(unwindowedPartition(""),
                     partitioner(8).partition(TOPIC, null, new byte[3], null, null, cluster()));
    }

    @Test
    void aRecordWithoutAKeyGoesToSomePartition() {
        int partition = partitioner(8).partition(TOPIC, null, null, null, null, cluster());
        assertTrue(partition >= 0 && partition < PARTITIONS, "partition " + partition);
    }
}

package io.metastore.join;

import java.io.Serializable;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

import org.apache.spark.sql.Row;

/**
 * The order in which Kafka Streams processes a key's records of a micro-batch: each input
 * partition's records (a join side's, {@code __MS_SIDE}, and partition, {@code __MS_AT_P}) in
 * offset order ({@code __MS_AT_O}), and across partitions the one whose next record has the
 * smallest time ({@code __MS_AT}) first, a table's before a stream's at the same time, as its
 * partition group picks the next record to process.
 */
final class Arrival implements Serializable {
    private static final long serialVersionUID = 1L;
    private final int side;
    private final int partition;
    private final int offset;
    private final int time;

    Arrival(int side, int partition, int offset, int time) {
        this.side = side;
        this.partition = partition;
        this.offset = offset;
        this.time = time;
    }

    List<Row> order(scala.collection.Iterator<Row> rows) {
        Map<Long, List<Row>> queues = new TreeMap<>();
        int total = 0;
        while (rows.hasNext()) {
            Row row = rows.next();
            long queue = ((long) row.getInt(side) << 32) | (row.getInt(partition) & 0xffffffffL);
            queues.computeIfAbsent(queue, ignored -> new ArrayList<>()).add(row);
            total++;
        }
        List<List<Row>> lists = new ArrayList<>(queues.values());
        for (List<Row> list : lists) {
            list.sort(Comparator.comparingLong(row -> row.getLong(offset)));
        }
        int[] heads = new int[lists.size()];
        List<Row> ordered = new ArrayList<>(total);
        while (ordered.size() < total) {
            int next = -1;
            long nextTime = Long.MAX_VALUE;
            for (int queue = 0; queue < lists.size(); queue++) {  // ascending (side, partition)
                if (heads[queue] < lists.get(queue).size()) {
                    Row head = lists.get(queue).get(heads[queue]);
                    long headTime = head.isNullAt(time) ? Long.MIN_VALUE : head.getLong(time);
                    if (next < 0 || headTime < nextTime) {
                        next = queue;
                        nextTime = headTime;
                    }
                }
            }
            ordered.add(lists.get(next).get(heads[next]++));
        }
        return ordered;
    }
}

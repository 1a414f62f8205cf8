import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Arrays;
import java.util.Collections;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.common.utils.Utils;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.KTable;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.TimeWindows;
import org.apache.kafka.streams.kstream.Windowed;
import org.apache.kafka.streams.state.WindowStore;

/**
 * The benchmark's Kafka Streams peer: the topologies ksqlDB builds for the benchmark's three
 * statements, written by hand on Kafka Streams, with ksqlDB's defaults (a 2 s commit interval,
 * a 10 MB record cache, at-least-once, the topology optimized, Jackson for JSON). Keys are KAFKA INTs (4 bytes), values
 * JSON objects of AMOUNT, KEEP and SENT; the users table's values hold NAME.
 *
 * <p>Run by {@code integration.bench.streams_peer}: arguments are the bootstrap servers, a state
 * directory and the stream threads; then one command a line on stdin, each answered on stdout:
 * {@code <query> <source> <sink> [<users topic>]} starts the query ({@code started}),
 * {@code stop} stops it and deletes its state ({@code stopped}). It prints {@code ready} first.
 */
public final class StreamsPeer {

  private static final ObjectMapper JSON = new ObjectMapper();
  private static final Duration WINDOW = Duration.ofHours(1);
  private static final Duration GRACE = Duration.ofHours(24);  // ksqlDB's default grace

  private StreamsPeer() {
  }

  public static void main(final String[] args) throws IOException {
    final String bootstrap = args[0];
    final String stateDir = args[1];
    final int threads = Integer.parseInt(args[2]);
    final BufferedReader commands = new BufferedReader(
        new InputStreamReader(System.in, StandardCharsets.UTF_8));
    KafkaStreams running = null;
    int started = 0;
    System.out.println("ready");
    System.out.flush();
    for (String line = commands.readLine(); line != null; line = commands.readLine()) {
      final String[] words = line.trim().split(" ");
      if (running != null) {
        stop(running);
        running = null;
      }
      if ("stop".equals(words[0])) {
        System.out.println("stopped");
      } else {
        started += 1;
        final String id = "streams-peer-" + words[0] + "-" + started + "-" + System.nanoTime();
        final Properties properties = properties(bootstrap, stateDir, threads, id);
        running = new KafkaStreams(topology(words, properties), properties);
        running.start();
        System.out.println("started");
      }
      System.out.flush();
    }
    if (running != null) {
      stop(running);
    }
  }

  /** Close the application and delete its local state (only once it has closed). */
  static void stop(final KafkaStreams running) {
    if (running.close(Duration.ofSeconds(60))) {
      running.cleanUp();
    } else {
      System.err.println("the Kafka Streams application did not close within 60 s");
    }
  }

  static Properties properties(final String bootstrap, final String stateDir, final int threads,
                               final String applicationId) {
    final Properties properties = new Properties();
    properties.put(StreamsConfig.APPLICATION_ID_CONFIG, applicationId);
    properties.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    properties.put(StreamsConfig.STATE_DIR_CONFIG, stateDir);
    properties.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, threads);
    properties.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 2000);  // ksqlDB's
    properties.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 10L * 1024 * 1024);  // ksqlDB's
    properties.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
    properties.put(StreamsConfig.TOPOLOGY_OPTIMIZATION_CONFIG, StreamsConfig.OPTIMIZE);  // ksqlDB's
    return properties;
  }

  static Topology topology(final String[] words, final Properties properties) {
    final String query = words[0];
    final String source = words[1];
    final String sink = words[2];
    final StreamsBuilder builder = new StreamsBuilder();
    final KStream<byte[], byte[]> events = builder.stream(
        source, Consumed.with(Serdes.ByteArray(), Serdes.ByteArray()));
    final Produced<byte[], byte[]> out = Produced.with(Serdes.ByteArray(), Serdes.ByteArray());
    switch (query) {
      case "filter":
        events.mapValues(StreamsPeer::parse)
            .filter((key, value) -> value != null && value.path("KEEP").asBoolean(false))
            .mapValues(value -> write(pick(JSON.createObjectNode(), value, "AMOUNT", "SENT")))
            .to(sink, out);
        break;
      case "count":
        events.groupByKey(Grouped.with(Serdes.ByteArray(), Serdes.ByteArray()))
            .windowedBy(TimeWindows.ofSizeAndGrace(WINDOW, GRACE))
            .count(Materialized.<byte[], Long, WindowStore<Bytes, byte[]>>as("counts")
                .withKeySerde(Serdes.ByteArray()).withValueSerde(Serdes.Long()))
            .toStream()
            .map((windowed, count) -> KeyValue.pair(windowedKey(windowed),
                write(JSON.createObjectNode().put("N", count))))
            .to(sink, out.withStreamPartitioner(StreamsPeer::keyPartition));
        break;
      case "join":
        final KTable<byte[], byte[]> users = builder.table(
            words[3], Consumed.with(Serdes.ByteArray(), Serdes.ByteArray()));
        events.join(users, StreamsPeer::joined).to(sink, out);
        break;
      default:
        throw new IllegalArgumentException("no such query: " + query);
    }
    return builder.build(properties);
  }

  /** ksqlDB's windowed sink partitioning: a window goes to the partition of its key alone
   * (Kafka Streams' WindowedStreamPartitioner), as the default partitioner places the key. */
  static Optional<Set<Integer>> keyPartition(final String topic, final byte[] key,
                                             final byte[] value, final int partitions) {
    final byte[] alone = Arrays.copyOf(key, key.length - Long.BYTES);
    return Optional.of(Collections.singleton(
        Utils.toPositive(Utils.murmur2(alone)) % partitions));
  }

  /** ksqlDB's windowed KAFKA key: the key's bytes, then the window's start (8 bytes). */
  static byte[] windowedKey(final Windowed<byte[]> windowed) {
    final byte[] key = windowed.key();
    return ByteBuffer.allocate(key.length + Long.BYTES).put(key)
        .putLong(windowed.window().start()).array();
  }

  static byte[] joined(final byte[] event, final byte[] user) {
    final JsonNode left = parse(event);
    final JsonNode right = parse(user);
    if (left == null || right == null) {
      return null;
    }
    return write(pick(pick(JSON.createObjectNode(), left, "AMOUNT", "SENT"), right, "NAME"));
  }

  static JsonNode parse(final byte[] value) {
    try {
      return value == null ? null : JSON.readTree(value);
    } catch (IOException unreadable) {
      return null;  // ksqlDB logs and skips a record it cannot deserialize
    }
  }

  static byte[] write(final JsonNode value) {
    try {
      return JSON.writeValueAsBytes(value);
    } catch (IOException impossible) {
      throw new IllegalStateException(impossible);
    }
  }

  static ObjectNode pick(final ObjectNode into, final JsonNode from, final String... fields) {
    for (final String field : fields) {
      into.set(field, from.get(field));
    }
    return into;
  }
}

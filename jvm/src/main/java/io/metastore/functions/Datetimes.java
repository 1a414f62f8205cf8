package io.metastore.functions;

import java.time.Instant;
import java.time.ZoneId;
import java.time.format.DateTimeFormatter;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/**
 * ksqlDB's formatting of a time in a named zone (TIMESTAMPTOSTRING, FORMAT_TIMESTAMP with a
 * zone), called from Spark SQL with {@code java_method}: Java's {@code DateTimeFormatter} at the
 * zone, so zone names and offsets in the pattern ({@code z}, {@code X}, ...) are the zone's, as
 * ksqlDB writes them, where Spark's {@code date_format} writes its session's.
 */
public final class Datetimes {
    private static final int CACHED_PATTERNS = 1000;
    private static final Map<String, DateTimeFormatter> FORMATTERS = new ConcurrentHashMap<>();

    private Datetimes() {
    }

    /**
     * {@code epochMillis} formatted with {@code pattern} at {@code zone} (a {@code ZoneId}),
     * after the character {@code v}; {@code n} alone for no text: a NULL argument, a pattern
     * Java rejects or an unknown zone (where ksqlDB's function fails). {@code java_method}
     * returns a Java null as the text {@code null}, which a formatted time can be.
     */
    public static String formatInZone(Long epochMillis, String pattern, String zone) {
        if (epochMillis == null || pattern == null || zone == null) {
            return "n";
        }
        try {
            return "v" + Instant.ofEpochMilli(epochMillis).atZone(ZoneId.of(zone))
                    .format(formatter(pattern));
        } catch (RuntimeException e) {
            return "n";
        }
    }

    private static DateTimeFormatter formatter(String pattern) {
        DateTimeFormatter cached = FORMATTERS.get(pattern);
        if (cached != null) {
            return cached;
        }
        DateTimeFormatter created = DateTimeFormatter.ofPattern(pattern);
        if (FORMATTERS.size() < CACHED_PATTERNS) {
            FORMATTERS.put(pattern, created);
        }
        return created;
    }
}

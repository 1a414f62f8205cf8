package io.metastore.functions;

import static org.junit.jupiter.api.Assertions.assertEquals;

import org.junit.jupiter.api.Test;

/** Times formatted at a zone, with the zone's names and offsets, as ksqlDB writes them. */
class DatetimesTest {
    private static final long JULY_FIRST_2021_NOON_UTC = 1_625_140_800_000L;

    @Test
    void aTimeIsFormattedAtTheNamedZone() {
        assertEquals("v2021-07-01 14:00:00 CEST",
                Datetimes.formatInZone(JULY_FIRST_2021_NOON_UTC, "yyyy-MM-dd HH:mm:ss z",
                                       "Europe/Berlin"));
        assertEquals("v2021-07-01T08:00-04:00",
                Datetimes.formatInZone(JULY_FIRST_2021_NOON_UTC, "yyyy-MM-dd'T'HH:mmXXX",
                                       "America/New_York"));
    }

    @Test
    void aNullArgumentAnUnknownZoneOrABadPatternIsNoText() {
        assertEquals("n", Datetimes.formatInZone(null, "yyyy", "UTC"));
        assertEquals("n", Datetimes.formatInZone(0L, "yyyy", "Mars/Olympus"));
        assertEquals("n", Datetimes.formatInZone(0L, "yyyy-{{", "UTC"));
    }

    @Test
    void aPatternThatWritesNothingIsAnEmptyTextNotNoText() {
        assertEquals("v", Datetimes.formatInZone(0L, "", "UTC"));
    }
}

package io.metastore.json;

import static org.junit.jupiter.api.Assertions.assertEquals;

import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/** ksqlDB's JSON deserializer's rules, as {@link JsonKinds} applies them to nested values. */
class JsonKindsTest {
    private static final String INT_ARRAY = "{\"t\": \"ARRAY\", \"e\": {\"t\": \"INTEGER\"}}";
    private static final String BOOLEAN_MAP = "{\"t\": \"MAP\", \"v\": {\"t\": \"BOOLEAN\"}}";
    private static final String STRUCT = "{\"t\": \"STRUCT\", \"f\": [[\"ID\", {\"t\": \"BIGINT\"}],"
            + " [\"AT\", {\"t\": \"TIME\"}], [\"PRICE\", {\"t\": \"DECIMAL\", \"p\": 4, \"s\": 2}],"
            + " [\"DATA\", {\"t\": \"BYTES\"}]]}";

    @ParameterizedTest(name = "{0} as an ARRAY<INTEGER>: {1}")
    @CsvSource(delimiter = '|', value = {
        "[1, 2, 3]        | true",
        "[\"4\", null]    | true",
        "[]               | true",
        "[1.5]            | true",
        "[\"x\"]          | false",
        "[true]           | false",
        "[2147483648]     | true",
        "[\"2147483648\"] | false",
        "{\"a\": 1}       | false",
        "[1,              | false",
    })
    void arraysTakeNumbersAndNumericStringsOnly(String json, String accepted) {
        assertEquals(accepted, JsonKinds.accepts(json, INT_ARRAY));
    }

    @ParameterizedTest(name = "{0} as a MAP<STRING, BOOLEAN>: {1}")
    @CsvSource(delimiter = '|', value = {
        "{\"a\": true, \"b\": false, \"c\": null} | true",
        "{\"a\": \"true\"}                        | false",
        "{\"a\": 1}                               | false",
        "[true]                                   | false",
    })
    void booleansAreOnlyJsonBooleans(String json, String accepted) {
        assertEquals(accepted, JsonKinds.accepts(json, BOOLEAN_MAP));
    }

    @ParameterizedTest(name = "{0} as a STRUCT: {1}")
    @CsvSource(delimiter = '|', value = {
        "{\"ID\": 1, \"AT\": 0, \"PRICE\": 12.34, \"DATA\": \"AAE=\"}     | true",
        "{\"id\": \"7\", \"at\": 86400000, \"price\": \"-99.99\"}         | true",
        "{}                                                               | true",
        "{\"ID\": \"seven\"}                                              | false",
        "{\"AT\": 86400001}                                               | false",
        "{\"AT\": -1}                                                     | false",
        "{\"PRICE\": 100}                                                 | false",
        "{\"PRICE\": 1.234}                                               | false",
        "{\"PRICE\": 1.230}                                               | true",
        "{\"DATA\": 5}                                                    | false",
        "{\"DATA\": \"not base64!\"}                                      | false",
        "[]                                                               | false",
    })
    void structFieldsAreReadByNameThenByUpperCasedName(String json, String accepted) {
        assertEquals(accepted, JsonKinds.accepts(json, STRUCT));
    }

    @ParameterizedTest(name = "{0} as DECIMAL({1}, {2}): {3}")
    @CsvSource({
        "12.34, 4, 2, true",
        "-12.3, 4, 2, true",
        "99.99, 4, 2, true",
        "100, 4, 2, false",
        "1.005, 4, 2, false",
        "1.000, 4, 2, true",
        "1e1, 4, 2, true",
        "1e2, 4, 2, false",
        "abc, 4, 2, false",
        "'', 4, 2, false",
    })
    void decimalsFitWithoutRounding(String number, int precision, int scale, String fits) {
        assertEquals(fits, JsonKinds.fitsDecimal(number, precision, scale));
    }

    @org.junit.jupiter.api.Test
    void noTextIsNoValue() {
        assertEquals("true", JsonKinds.accepts(null, INT_ARRAY));
        assertEquals("true", JsonKinds.fitsDecimal(null, 4, 2));
    }
}

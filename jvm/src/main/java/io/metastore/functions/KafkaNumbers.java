package io.metastore.functions;

import java.util.Map;
import org.apache.spark.sql.connector.catalog.functions.BoundFunction;
import org.apache.spark.sql.connector.catalog.functions.ScalarFunction;
import org.apache.spark.sql.connector.catalog.functions.UnboundFunction;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;

/**
 * The KAFKA format's numbers, as Kafka's {@code IntegerDeserializer}, {@code LongDeserializer}
 * and {@code DoubleDeserializer} read them: {@code kafka_int}, {@code kafka_bigint} and
 * {@code kafka_double} of a key's or value's bytes, big-endian. Each reads the first 4 or 8
 * bytes; the SQL that calls them (metastore.spark.views) calls them only on bytes of that size,
 * where Kafka's deserializers refuse any other (fewer bytes, or none, are an
 * IllegalArgumentException). Spark calls each one's static {@code invoke}
 * from its generated code, where the SQL read the bytes as hexadecimal text, then as a number.
 */
public final class KafkaNumbers {
    public static final Map<String, UnboundFunction> FUNCTIONS = Map.of(
            "kafka_int", new Unbound(new IntFunction()),
            "kafka_bigint", new Unbound(new BigintFunction()),
            "kafka_double", new Unbound(new DoubleFunction()));

    private KafkaNumbers() {
    }

    private static long bigEndian(byte[] bytes, int size) {
        if (bytes == null || bytes.length < size) {  // the SQL calls it on bytes of the size only
            throw new IllegalArgumentException("a KAFKA number of " + size + " bytes read from "
                    + (bytes == null ? "no bytes" : bytes.length + " bytes"));
        }
        long value = 0;
        for (int i = 0; i < size; i++) {
            value = (value << 8) | (bytes[i] & 0xFF);
        }
        return value;
    }

    /** One number function, bound to its one argument, BINARY. */
    private static final class Unbound implements UnboundFunction {
        private static final long serialVersionUID = 1L;
        private final ScalarFunction<?> bound;

        Unbound(ScalarFunction<?> bound) {
            this.bound = bound;
        }

        @Override
        public BoundFunction bind(StructType inputType) {
            if (inputType.fields().length != 1) {
                throw new UnsupportedOperationException(name() + " takes the bytes of a number");
            }
            return bound;
        }

        @Override
        public String description() {
            return name() + "(bytes): a KAFKA-format number (io.metastore.functions.KafkaNumbers)";
        }

        @Override
        public String name() {
            return bound.name();
        }
    }

    /** A number function's name and result; each subclass has its own static invoke. */
    private abstract static class NumberFunction<T> implements ScalarFunction<T> {
        private static final long serialVersionUID = 1L;
        private final String name;
        private final DataType result;

        NumberFunction(String name, DataType result) {
            this.name = name;
            this.result = result;
        }

        @Override
        public DataType[] inputTypes() {
            return new DataType[] {DataTypes.BinaryType};
        }

        @Override
        public DataType resultType() {
            return result;
        }

        @Override
        public String name() {
            return name;
        }

        @Override
        public boolean isResultNullable() {
            return false;
        }

        @Override
        public String canonicalName() {
            return "io.metastore.functions." + name;
        }
    }

    /** {@code kafka_int}: 4 bytes as an INT. */
    public static final class IntFunction extends NumberFunction<Integer> {
        private static final long serialVersionUID = 1L;

        IntFunction() {
            super("kafka_int", DataTypes.IntegerType);
        }

        public static int invoke(byte[] bytes) {
            return (int) bigEndian(bytes, Integer.BYTES);
        }
    }

    /** {@code kafka_bigint}: 8 bytes as a BIGINT. */
    public static final class BigintFunction extends NumberFunction<Long> {
        private static final long serialVersionUID = 1L;

        BigintFunction() {
            super("kafka_bigint", DataTypes.LongType);
        }

        public static long invoke(byte[] bytes) {
            return bigEndian(bytes, Long.BYTES);
        }
    }

    /** {@code kafka_double}: 8 bytes as a DOUBLE (IEEE 754). */
    public static final class DoubleFunction extends NumberFunction<Double> {
        private static final long serialVersionUID = 1L;

        DoubleFunction() {
            super("kafka_double", DataTypes.DoubleType);
        }

        public static double invoke(byte[] bytes) {
            return Double.longBitsToDouble(bigEndian(bytes, Long.BYTES));
        }
    }
}

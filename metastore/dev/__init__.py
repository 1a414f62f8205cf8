"""Local development infrastructure: jars from Maven Central and a real Kafka on 127.0.0.1."""

"""A thin typed wrapper around confluent_kafka, the only code that uses it: settings and client
creation, producers (plain and transactional), partition readers and end-offset probes, keyed
compacted topics, consumer-group members, and admin. Every failure is an error of
:mod:`metastore.kafka.exceptions`."""

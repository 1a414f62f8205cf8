"""A thin typed wrapper around confluent_kafka: settings, transactional producer, log consumer, admin."""

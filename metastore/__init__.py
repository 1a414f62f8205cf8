"""metastore: a replicated command-log metastore in the style of ksqlDB, on Kafka and Spark."""

__version__ = "0.1.0"

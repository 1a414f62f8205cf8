"""A Confluent-compatible Schema Registry, as the node uses it: the REST client and its errors."""

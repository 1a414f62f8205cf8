"""Kafka Connect: the connector statements, executed against a Connect cluster's REST API."""

-- Written while one node is down; it replays these when it comes back.
CREATE STREAM errors (
    id      STRING KEY,
    message STRING
) WITH (KAFKA_TOPIC='errors', VALUE_FORMAT='JSON', PARTITIONS=1);

DROP STREAM shipments;

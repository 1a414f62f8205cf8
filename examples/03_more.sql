-- A delimited stream, a custom type in use, and an ALTER.
CREATE STREAM clicks (
    click_id STRING KEY,
    url      STRING,
    at       BIGINT
) WITH (KAFKA_TOPIC='clicks', VALUE_FORMAT='DELIMITED', PARTITIONS=1);

CREATE STREAM shipments (
    order_id STRING KEY,
    ship_to  address
) WITH (KAFKA_TOPIC='shipments', VALUE_FORMAT='JSON', PARTITIONS=1);

ALTER STREAM clicks ADD COLUMN referrer STRING;

-- Source streams and tables over Kafka topics (PARTITIONS creates the topic).
CREATE STREAM pageviews (
    viewtime BIGINT,
    user_id  STRING KEY,
    page_id  STRING
) WITH (KAFKA_TOPIC='pageviews', VALUE_FORMAT='JSON', PARTITIONS=1);

CREATE TABLE users (
    user_id  STRING PRIMARY KEY,
    regionid STRING,
    gender   STRING
) WITH (KAFKA_TOPIC='users', VALUE_FORMAT='JSON', PARTITIONS=1);

CREATE TYPE address AS STRUCT<street STRING, city STRING, zip STRING>;

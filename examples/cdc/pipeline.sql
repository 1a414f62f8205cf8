-- The streaming side of the change-data-capture walkthrough (docs/connectors.md), run with the
-- variables pg_port, prefix, connector, slot, table and counts (metastore dev cdc gives them).

-- Debezium streams public.customers into the topic ${prefix}.public.customers: each row's new
-- state (ExtractNewRecordState), a delete as a tombstone, the key the row's id alone.
CREATE SOURCE CONNECTOR ${connector} WITH (
    'connector.class' = 'io.debezium.connector.postgresql.PostgresConnector',
    'database.hostname' = '127.0.0.1',
    'database.port' = '${pg_port}',
    'database.user' = 'postgres',
    'database.password' = 'postgres',
    'database.dbname' = 'postgres',
    'topic.prefix' = '${prefix}',
    'table.include.list' = 'public.customers',
    'plugin.name' = 'pgoutput',
    'slot.name' = '${slot}',
    'slot.drop.on.stop' = 'true',
    'publication.name' = '${slot}',
    'publication.autocreate.mode' = 'filtered',
    'topic.creation.default.partitions' = '1',
    'topic.creation.default.replication.factor' = '1',
    'key.converter' = 'org.apache.kafka.connect.json.JsonConverter',
    'key.converter.schemas.enable' = 'false',
    'value.converter' = 'org.apache.kafka.connect.json.JsonConverter',
    'value.converter.schemas.enable' = 'false',
    'transforms' = 'unwrap,key',
    'transforms.unwrap.type' = 'io.debezium.transforms.ExtractNewRecordState',
    'transforms.unwrap.delete.tombstone.handling.mode' = 'tombstone',
    'transforms.key.type' = 'org.apache.kafka.connect.transforms.ExtractField$Key',
    'transforms.key.field' = 'id'
);

-- A table over the change topic: the latest state of each customer.
CREATE TABLE ${table} (
    id      INT PRIMARY KEY,
    name    STRING,
    country STRING
) WITH (KAFKA_TOPIC='${prefix}.public.customers', KEY_FORMAT='JSON', VALUE_FORMAT='JSON',
        PARTITIONS=1);

-- Customers per country, kept as rows are inserted, updated and deleted in PostgreSQL.
CREATE TABLE ${counts} AS
    SELECT country, COUNT(*) AS customers
    FROM ${table}
    GROUP BY country;

-- Ask it (a pull query): SELECT * FROM ${counts};

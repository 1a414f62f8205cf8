-- The PostgreSQL side of the change-data-capture walkthrough (docs/connectors.md): a table whose
-- changes Debezium streams into Kafka, and its first rows.
DROP TABLE IF EXISTS customers;
CREATE TABLE customers (
    id      INT PRIMARY KEY,
    name    TEXT NOT NULL,
    country TEXT NOT NULL
);
INSERT INTO customers VALUES (1, 'Ann', 'NL'), (2, 'Bo', 'DE'), (3, 'Cy', 'FR');

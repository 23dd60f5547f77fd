-- Usage per tenant per hour (UTC), for billing. Message counts are added in the transaction
-- that stores the messages, so they are exact: a retried message (same id) is stored once and
-- counted once, and a write lost with a killed process is neither stored nor counted.
CREATE TABLE usage_hourly (
    tenant_id TEXT   NOT NULL,
    hour_ms   INTEGER     NOT NULL,
    metric    TEXT   NOT NULL,
    value     INTEGER     NOT NULL,
    PRIMARY KEY (tenant_id, hour_ms, metric)
);
CREATE INDEX usage_hourly_hour ON usage_hourly (hour_ms);

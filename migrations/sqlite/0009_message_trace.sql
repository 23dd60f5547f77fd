-- The traceparent of the request that created a message (see the Postgres migration of the same name).
ALTER TABLE messages ADD COLUMN traceparent TEXT;

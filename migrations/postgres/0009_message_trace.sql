-- The W3C traceparent of the request that created a message, so an entry pushed again from the
-- inbox (catch-up after a reconnect, replay) continues the message's trace.
ALTER TABLE messages ADD COLUMN traceparent TEXT;

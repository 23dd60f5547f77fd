-- Asks whose sender blocks until they are answered (a PreToolUse approval, `repowire question
-- ask-blocking`): 'waiting' while a caller waits, 'decided' once the caller got the outcome,
-- 'abandoned' once it stopped waiting without one. A reply that arrives for an abandoned ask
-- came too late to count: it is not handed to the agent, and its sender is told it failed.
ALTER TABLE sent ADD COLUMN blocking TEXT;

-- Structured questions with a timeout: when the question closes if nobody answers it
-- (created_at_ms + question.timeout_ms). NULL for every other message. The relay closes open
-- asks past their deadline (with the question's default, or as expired) and refuses answers
-- after it; the partial index keeps that search to the open questions that have one.
ALTER TABLE messages ADD COLUMN deadline_ms BIGINT;
CREATE INDEX messages_open_deadline ON messages (deadline_ms)
    WHERE deadline_ms IS NOT NULL AND closed_at_ms IS NULL;

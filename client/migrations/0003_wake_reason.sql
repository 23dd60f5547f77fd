-- Why the daemon's wake did not type a queued message into its agent's pane (a person typing,
-- a draft in the box, a pane that may not be typed into). When the message is then handed over
-- another way (the person's own prompt, a turn end), its `injected` receipt says so with this.
ALTER TABLE inbox ADD COLUMN wake_reason TEXT;

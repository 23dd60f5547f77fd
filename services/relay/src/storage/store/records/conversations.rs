//! Direct conversations' writes (protocol.md §10.15): what a conversation message does to its
//! conversation, and the relay's own ends (a participant's session ended, or nobody spoke for
//! the idle timeout).

use super::{Enqueued, NewMessage};

/// What a conversation message does to its conversation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConversationWrite {
    /// `converse`: a new conversation with these participants, the opener first (its
    /// `recipients` are the others).
    Open {
        /// The relay-minted id.
        conversation_id: String,
        /// Every participant, the opener first.
        participants: Vec<repowire_protocol::PeerSummary>,
    },
    /// `turn`: one more message in an existing conversation, from one of its participants.
    Turn {
        /// The conversation.
        conversation_id: String,
        /// A person's prompt started the turn (resumes a paused conversation).
        by_person: bool,
        /// The loop guard: turns in a row no person started, after which the conversation
        /// pauses.
        loop_turns: i64,
        /// The loop guard's bytes: text relayed in a row without a person's turn, past which
        /// the conversation pauses.
        loop_bytes: i64,
        /// The conversation's own rate: turns a minute, a minute's worth at once.
        turns_per_minute: i64,
    },
    /// `end_conversation`: a participant ends it; the message is the notice to the others.
    End {
        /// The conversation.
        conversation_id: String,
        /// Why.
        reason: String,
    },
}

/// A conversation's turn rate as a generic cell rate (GCRA): `tat_ms` is the theoretical
/// arrival time of the next turn as stored (0 for none yet). A turn at `now_ms` goes ahead, and
/// the new time is returned, unless it comes more than a minute's worth of turns early; then
/// the error is how long to wait, ms (at least 1). Pure, so its time is the caller's.
pub fn turn_rate(tat_ms: i64, now_ms: i64, per_minute: i64) -> Result<i64, u64> {
    let interval = 60_000 / per_minute.max(1);
    // A minute's worth of turns may come at once: `per_minute` cells of `interval`.
    let tolerance = interval.saturating_mul(per_minute.max(1) - 1);
    // A stored time more than a minute ahead (a pod whose clock ran fast) waits a minute at
    // most, never as long as that clock was off.
    let tat = tat_ms.min(now_ms.saturating_add(60_000)).max(now_ms);
    let early = tat - now_ms - tolerance;
    if early > 0 {
        return Err(u64::try_from(early).unwrap_or(1).max(1));
    }
    Ok(tat + interval)
}

impl ConversationWrite {
    /// The conversation written to.
    pub fn id(&self) -> &str {
        match self {
            Self::Open {
                conversation_id, ..
            }
            | Self::Turn {
                conversation_id, ..
            }
            | Self::End {
                conversation_id, ..
            } => conversation_id,
        }
    }
}

/// A notice the relay wrote into a conversation (paused, ended), for every participant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notice {
    /// The notice as a message.
    pub message: NewMessage,
    /// Its correlation id as stored.
    pub correlation_id: Option<String>,
    /// Its `Message.conversation`, JSON.
    pub conversation: String,
    /// The participants' slots.
    pub enqueued: Vec<Enqueued>,
}

/// The relay ends a conversation on its own: a participant's peer was unregistered (its
/// session ended), or no turn came for the idle timeout. Every participant still in it is told
/// (the one that left is not), with a notice from the peer that left or, for an idle end, from
/// the opener.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RelayEnd {
    /// Tenant.
    pub tenant_id: String,
    /// The conversation.
    pub conversation_id: String,
    /// Why it ends.
    pub cause: EndCause,
    /// Now (ms): the end's time.
    pub now_ms: i64,
    /// When the notice's undelivered entries expire (ms).
    pub expires_at_ms: i64,
}

/// Why the relay ends a conversation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EndCause {
    /// This participant's peer was unregistered.
    Left {
        /// The peer.
        peer_id: String,
    },
    /// No turn since this time (ms); a turn that came since keeps it going.
    IdleSince {
        /// The idle cut-off (ms).
        before_ms: i64,
        /// The idle timeout, for the notice (seconds).
        idle_secs: u64,
    },
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::turn_rate;

    #[test]
    fn a_minutes_worth_of_turns_goes_at_once_then_one_each_interval() {
        // 3 a minute: one each 20 s, three at once.
        let t0 = 1_000_000;
        let mut tat = 0;
        for _ in 0..3 {
            tat = turn_rate(tat, t0, 3).unwrap();
        }
        assert_eq!(tat, t0 + 60_000);
        // The fourth at once waits until one interval has passed.
        assert_eq!(turn_rate(tat, t0, 3), Err(20_000));
        assert_eq!(turn_rate(tat, t0 + 19_999, 3), Err(1));
        let tat = turn_rate(tat, t0 + 20_000, 3).unwrap();
        assert_eq!(tat, t0 + 80_000);
        // Idle for long: a full minute's worth again, not more.
        let later = t0 + 10 * 60_000;
        let mut tat2 = tat;
        for _ in 0..3 {
            tat2 = turn_rate(tat2, later, 3).unwrap();
        }
        assert!(turn_rate(tat2, later, 3).is_err());
    }

    #[test]
    fn a_time_stored_far_ahead_waits_a_minute_at_most() {
        let now = 1_000_000;
        let wait = turn_rate(now + 3_600_000, now, 60).unwrap_err();
        assert!(wait <= 60_000, "{wait}");
    }

    #[test]
    fn a_refused_turn_changes_nothing_and_one_a_minute_spaces_them_by_a_minute() {
        let tat = turn_rate(0, 5_000, 1).unwrap();
        assert_eq!(tat, 65_000);
        assert_eq!(turn_rate(tat, 5_001, 1), Err(59_999));
        assert_eq!(turn_rate(tat, 65_000, 1), Ok(125_000));
    }
}

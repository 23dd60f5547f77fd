//! Every limit a tenant can hit: what a plan sets, what a tenant overrides, and the effective
//! values ([`effective`]); [`enforce`] applies them to what a tenant spends.

pub mod enforce;
pub mod slots;

use repowire_protocol::limits::MAX_TEXT_BYTES;
use serde::{Deserialize, Deserializer};

use crate::storage::store::Limits;

/// The range each limit may take (a plan's `null` is unlimited; there is no 0).
pub const RANGES: [(&str, i64, i64); 8] = [
    ("max_peers", 1, 1_000_000),
    ("max_connections", 1, 1_000_000),
    ("max_message_bytes", 1, MAX_TEXT_BYTES as i64),
    ("inbox_cap", 1, 1_000_000),
    ("messages_per_minute", 1, 100_000_000),
    ("messages_per_month", 1, 1_000_000_000_000),
    ("max_state_bytes", 1, 1 << 40),
    ("max_stored_peers", 1, 100_000_000),
];

fn fields(l: &Limits) -> [Option<i64>; 8] {
    [
        l.max_peers,
        l.max_connections,
        l.max_message_bytes,
        l.inbox_cap,
        l.messages_per_minute,
        l.messages_per_month,
        l.max_state_bytes,
        l.max_stored_peers,
    ]
}

/// Checks every set value against [`RANGES`]; the error names the first one out of range.
pub fn validate(limits: &Limits) -> Result<(), String> {
    for ((name, min, max), value) in RANGES.iter().zip(fields(limits)) {
        if let Some(v) = value
            && !(*min..=*max).contains(&v)
        {
            return Err(format!("`{name}` is {v}; it must be {min} to {max}"));
        }
    }
    Ok(())
}

/// What applies to a tenant: each override where it has one, else the plan's value.
pub fn effective(plan: &Limits, overrides: &Limits) -> Limits {
    Limits {
        max_peers: overrides.max_peers.or(plan.max_peers),
        max_connections: overrides.max_connections.or(plan.max_connections),
        max_message_bytes: overrides.max_message_bytes.or(plan.max_message_bytes),
        inbox_cap: overrides.inbox_cap.or(plan.inbox_cap),
        messages_per_minute: overrides.messages_per_minute.or(plan.messages_per_minute),
        messages_per_month: overrides.messages_per_month.or(plan.messages_per_month),
        max_state_bytes: overrides.max_state_bytes.or(plan.max_state_bytes),
        max_stored_peers: overrides.max_stored_peers.or(plan.max_stored_peers),
    }
}

/// A change to limits: a field left out is unchanged, `null` clears it (unlimited in a plan,
/// the plan's value in overrides), a number sets it.
#[derive(Debug, Clone, Default, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct LimitsPatch {
    #[serde(default, deserialize_with = "present")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<i64>))]
    pub max_peers: Option<Option<i64>>,
    #[serde(default, deserialize_with = "present")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<i64>))]
    pub max_connections: Option<Option<i64>>,
    #[serde(default, deserialize_with = "present")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<i64>))]
    pub max_message_bytes: Option<Option<i64>>,
    #[serde(default, deserialize_with = "present")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<i64>))]
    pub inbox_cap: Option<Option<i64>>,
    #[serde(default, deserialize_with = "present")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<i64>))]
    pub messages_per_minute: Option<Option<i64>>,
    #[serde(default, deserialize_with = "present")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<i64>))]
    pub messages_per_month: Option<Option<i64>>,
    #[serde(default, deserialize_with = "present")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<i64>))]
    pub max_state_bytes: Option<Option<i64>>,
    #[serde(default, deserialize_with = "present")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<i64>))]
    pub max_stored_peers: Option<Option<i64>>,
}

/// A field that is present, `null` or not: told apart from an absent one (`#[serde(default)]`).
fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Option<i64>>, D::Error> {
    Option::<i64>::deserialize(d).map(Some)
}

impl LimitsPatch {
    /// `limits` with this change applied.
    pub fn apply(&self, limits: &Limits) -> Limits {
        let pick = |change: Option<Option<i64>>, old: Option<i64>| change.unwrap_or(old);
        Limits {
            max_peers: pick(self.max_peers, limits.max_peers),
            max_connections: pick(self.max_connections, limits.max_connections),
            max_message_bytes: pick(self.max_message_bytes, limits.max_message_bytes),
            inbox_cap: pick(self.inbox_cap, limits.inbox_cap),
            messages_per_minute: pick(self.messages_per_minute, limits.messages_per_minute),
            messages_per_month: pick(self.messages_per_month, limits.messages_per_month),
            max_state_bytes: pick(self.max_state_bytes, limits.max_state_bytes),
            max_stored_peers: pick(self.max_stored_peers, limits.max_stored_peers),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_patch_tells_absent_from_null_from_a_number() {
        let old = Limits {
            max_peers: Some(10),
            inbox_cap: Some(5),
            messages_per_minute: Some(60),
            ..Limits::default()
        };
        let patch: LimitsPatch =
            serde_json::from_str(r#"{"max_peers": 20, "inbox_cap": null}"#).expect("patch");
        let new = patch.apply(&old);
        assert_eq!(new.max_peers, Some(20));
        assert_eq!(new.inbox_cap, None, "null clears");
        assert_eq!(new.messages_per_minute, Some(60), "absent keeps");
        assert!(serde_json::from_str::<LimitsPatch>(r#"{"max_peer": 1}"#).is_err());
    }

    #[test]
    fn ranges_refuse_zero_negative_and_absurd_values() {
        for bad in [
            r#"{"max_peers": 0}"#,
            r#"{"inbox_cap": -1}"#,
            r#"{"max_message_bytes": 32769}"#,
            r#"{"messages_per_month": 1000000000001}"#,
        ] {
            let l: Limits = serde_json::from_str(bad).expect("parses");
            assert!(validate(&l).is_err(), "{bad}");
        }
        let ok: Limits =
            serde_json::from_str(r#"{"max_peers": 1, "max_message_bytes": 32768}"#).expect("ok");
        validate(&ok).expect("in range");
    }

    #[test]
    fn overrides_win_and_the_plan_fills_the_rest() {
        let plan = Limits {
            max_peers: Some(10),
            inbox_cap: None,
            messages_per_minute: Some(60),
            ..Limits::default()
        };
        let overrides = Limits {
            max_peers: Some(50),
            ..Limits::default()
        };
        let e = effective(&plan, &overrides);
        assert_eq!(e.max_peers, Some(50));
        assert_eq!(e.messages_per_minute, Some(60));
        assert_eq!(e.inbox_cap, None);
    }
}

//! Relay-minted identifiers: tenants (`tnt-…`), keys (`key-…`), peers, correlation ids.

/// A live connection of this process (numbered by the hub, from 1; never reused while the
/// process runs).
pub type ConnId = u64;

/// The prefix of every tenant id; no tenant name may start with it (in any case).
pub const TENANT_ID_PREFIX: &str = "tnt-";

/// 16 random lowercase base-32 characters (80 bits).
pub fn random_suffix() -> String {
    repowire_protocol::PeerId::from_random(rand::random())
        .0
        .trim_start_matches(repowire_protocol::ids::PEER_ID_PREFIX)
        .to_owned()
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

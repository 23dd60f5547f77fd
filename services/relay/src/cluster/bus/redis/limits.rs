//! The cluster-wide message bucket of a tenant on Redis: [`crate::cluster::bus::gcra`] as one Lua script, on
//! Redis's clock (`TIME`), so the pods' clocks do not matter and a take is one round trip.
//!
//! Key: `{prefix}:t:{tenant}:rate`, the bucket's theoretical arrival time (µs), expiring when
//! the bucket would be full again.
//!
//! A tenant's connections: `{prefix}:t:{tenant}:conns`, a sorted set of slots (`{pod}:{conn}`)
//! scored by expiry (ms), refreshed by the holding pod's heartbeat; a dead pod's slots stop
//! counting when they expire.

use std::sync::LazyLock;

use super::{RedisBus, unavailable};
use crate::cluster::bus::Result;
use crate::cluster::bus::gcra::{Grant, Rate};

/// KEYS[1] the bucket; ARGV: interval (µs), burst, tokens wanted, and the time (µs) or '' for
/// Redis's own. Returns {granted, µs until one would be granted when none was}.
const TAKE: &str = r#"
local interval = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local want = tonumber(ARGV[3])
local now
if ARGV[4] ~= '' then
  now = tonumber(ARGV[4])
else
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local tat = tonumber(redis.call('GET', KEYS[1]) or now)
if tat < now then
  tat = now
end
local room = math.floor((now + burst * interval - tat) / interval)
if room < 1 then
  return {0, math.max(1, math.ceil(tat + interval - burst * interval - now))}
end
local granted = math.min(room, want)
local new_tat = tat + granted * interval
redis.call('SET', KEYS[1], string.format('%.17g', new_tat), 'PX', math.ceil((new_tat - now) / 1000) + 1000)
return {granted, 0}
"#;

/// KEYS[1] the slots; ARGV: slot, max ('' for none), expiry (ms), now (ms), the set's TTL (ms).
/// Returns the slots held with this one, or -1 when refused.
const HOLD: &str = r#"
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[4])
if ARGV[2] ~= '' and not redis.call('ZSCORE', KEYS[1], ARGV[1])
   and redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[2]) then
  return -1
end
redis.call('ZADD', KEYS[1], ARGV[3], ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[5])
return redis.call('ZCARD', KEYS[1])
"#;

static HOLD_SCRIPT: LazyLock<redis::Script> = LazyLock::new(|| redis::Script::new(HOLD));

static TAKE_SCRIPT: LazyLock<redis::Script> = LazyLock::new(|| redis::Script::new(TAKE));

impl RedisBus {
    /// The key of a tenant's message bucket.
    pub fn rate_key(&self, tenant_id: &str) -> String {
        format!("{}:t:{tenant_id}:rate", self.prefix)
    }

    /// The key of a tenant's connection slots.
    pub fn conns_key(&self, tenant_id: &str) -> String {
        format!("{}:t:{tenant_id}:conns", self.prefix)
    }

    /// See [`crate::cluster::bus::Bus::hold_connection`].
    pub(super) async fn hold(
        &self,
        tenant_id: &str,
        slot: &str,
        max: Option<u64>,
        expires_at_ms: i64,
    ) -> Result<Option<u64>> {
        let now = crate::ids::now_ms();
        let held: i64 = HOLD_SCRIPT
            .key(self.conns_key(tenant_id))
            .arg(slot)
            .arg(max.map(|m| m.to_string()).unwrap_or_default())
            .arg(expires_at_ms)
            .arg(now)
            .arg((expires_at_ms - now).max(1))
            .invoke_async(&mut self.conn.clone())
            .await
            .map_err(unavailable)?;
        Ok(u64::try_from(held).ok())
    }

    /// See [`crate::cluster::bus::Bus::refresh_connections`]: one round trip.
    pub(super) async fn refresh_slots(
        &self,
        tenant_id: &str,
        slots: &[String],
        expires_at_ms: i64,
    ) -> Result<u64> {
        let key = self.conns_key(tenant_id);
        let now = crate::ids::now_ms();
        let mut pipe = redis::pipe();
        for slot in slots {
            pipe.cmd("ZADD")
                .arg(&key)
                .arg("XX")
                .arg(expires_at_ms)
                .arg(slot)
                .ignore();
        }
        if !slots.is_empty() {
            pipe.cmd("PEXPIRE")
                .arg(&key)
                .arg((expires_at_ms - now).max(1))
                .ignore();
        }
        // Slots whose expiry has passed (a dead pod's) are not counted.
        pipe.cmd("ZCOUNT")
            .arg(&key)
            .arg(format!("({now}"))
            .arg("+inf");
        let (live,): (u64,) = pipe
            .query_async(&mut self.conn.clone())
            .await
            .map_err(unavailable)?;
        Ok(live)
    }

    /// See [`crate::cluster::bus::Bus::release_connection`].
    pub(super) async fn release(&self, tenant_id: &str, slot: &str) -> Result<()> {
        redis::cmd("ZREM")
            .arg(self.conns_key(tenant_id))
            .arg(slot)
            .query_async::<()>(&mut self.conn.clone())
            .await
            .map_err(unavailable)
    }

    /// Takes up to `want` tokens at `now_us` (Redis's clock when `None`).
    pub async fn take_tokens_at(
        &self,
        tenant_id: &str,
        rate: Rate,
        want: u64,
        now_us: Option<u64>,
    ) -> Result<Grant> {
        let (granted, retry_after_us): (u64, u64) = TAKE_SCRIPT
            .key(self.rate_key(tenant_id))
            .arg(rate.interval_us().to_string())
            .arg(rate.burst)
            .arg(want.max(1))
            .arg(now_us.map(|t| t.to_string()).unwrap_or_default())
            .invoke_async(&mut self.conn.clone())
            .await
            .map_err(unavailable)?;
        Ok(Grant {
            granted,
            retry_after_us,
        })
    }
}

//! Tenant event logs on Redis: one stream per tenant, `{prefix}:t:{tenant}:events`, whose entry
//! ids are the log's places (`{n}-0`: 1, 2, 3 … with no gaps), so a cursor is a number and what
//! a trim removed after it is counted exactly. Appends are one script (numbered after the
//! newest entry, which trimming never removes); the stream lives for its TTL after the last
//! append, then starts again at 1.

use std::sync::LazyLock;

use super::{RedisBus, unavailable};
use crate::cluster::bus::memlog::missed;
use crate::cluster::bus::{BusError, EventPage, LoggedEvent, Result};

/// KEYS[1] the stream; ARGV: entries kept (at least), lifetime (ms), then the events. Returns
/// the newest entry's place.
const APPEND: &str = r#"
local n = 0
local newest = redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', 1)
if newest[1] then
  n = tonumber(string.match(newest[1][1], '^(%d+)'))
end
for i = 3, #ARGV do
  n = n + 1
  redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[1], n .. '-0', 'e', ARGV[i])
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return n
"#;

static APPEND_SCRIPT: LazyLock<redis::Script> = LazyLock::new(|| redis::Script::new(APPEND));

/// A stream entry as Redis returns it: its id and its fields, flat.
type Entry = (String, Vec<String>);

fn place(id: &str) -> Result<u64> {
    id.split('-')
        .next()
        .and_then(|n| n.parse().ok())
        .ok_or_else(|| BusError::Corrupt(format!("event log entry id {id}")))
}

fn logged(entries: Vec<Entry>) -> Result<Vec<LoggedEvent>> {
    entries
        .into_iter()
        .map(|(id, fields)| {
            let data = fields
                .chunks(2)
                .find(|f| f[0] == "e")
                .and_then(|f| f.get(1).cloned())
                .ok_or_else(|| BusError::Corrupt(format!("event log entry {id} has no event")))?;
            Ok(LoggedEvent {
                seq: place(&id)?,
                data,
            })
        })
        .collect()
}

impl RedisBus {
    /// The key of a tenant's event log.
    pub fn events_key(&self, tenant_id: &str) -> String {
        format!("{}:t:{tenant_id}:events", self.prefix)
    }

    /// See [`crate::cluster::bus::Bus::append_events`].
    pub(super) async fn append(
        &self,
        tenant_id: &str,
        events: &[String],
        keep: u64,
        ttl: std::time::Duration,
    ) -> Result<u64> {
        let mut call = APPEND_SCRIPT.key(self.events_key(tenant_id));
        call.arg(keep.max(1))
            .arg(u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX).max(1));
        for event in events {
            call.arg(event);
        }
        call.invoke_async(&mut self.conn.clone())
            .await
            .map_err(unavailable)
    }

    /// See [`crate::cluster::bus::Bus::read_events`]: one round trip.
    pub(super) async fn read(
        &self,
        tenant_id: &str,
        after: u64,
        limit: usize,
    ) -> Result<EventPage> {
        let key = self.events_key(tenant_id);
        let (entries, newest): (Vec<Entry>, Vec<Entry>) = redis::pipe()
            .cmd("XRANGE")
            .arg(&key)
            .arg(format!("{}-0", after.saturating_add(1)))
            .arg("+")
            .arg("COUNT")
            .arg(limit.max(1))
            .cmd("XREVRANGE")
            .arg(&key)
            .arg("+")
            .arg("-")
            .arg("COUNT")
            .arg(1)
            .query_async(&mut self.conn.clone())
            .await
            .map_err(unavailable)?;
        let last = match newest.first() {
            Some((id, _)) => place(id)?,
            None => 0,
        };
        let events = logged(entries)?;
        Ok(EventPage {
            missed: missed(after, &events),
            events,
            last,
        })
    }

    /// See [`crate::cluster::bus::Bus::latest_events`].
    pub(super) async fn latest(&self, tenant_id: &str, limit: usize) -> Result<EventPage> {
        let mut entries: Vec<Entry> = redis::cmd("XREVRANGE")
            .arg(self.events_key(tenant_id))
            .arg("+")
            .arg("-")
            .arg("COUNT")
            .arg(limit.max(1))
            .query_async(&mut self.conn.clone())
            .await
            .map_err(unavailable)?;
        let last = match entries.first() {
            Some((id, _)) => place(id)?,
            None => 0,
        };
        entries.reverse();
        Ok(EventPage {
            events: logged(entries)?,
            missed: 0,
            last,
        })
    }
}

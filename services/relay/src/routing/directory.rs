//! This pod's cache of stored peer records, for name resolution.
//!
//! In a cluster every message addressed by name reads the stored peers of that name (to see
//! peers live on other pods, and offline ones): one database round trip per message, which
//! profiling showed as a third of a pod's CPU under load. Registrations are rare next to
//! messages, so the answers are kept here until something can have changed them:
//!
//! - a registration on this pod drops its tenant's answers before the peer is announced;
//! - a registration on another pod reaches here as a [`crate::cluster::bus::BusEvent::PeersChanged`],
//!   sent on the same ordered channel as, and before, the peer's `online` presence frame: a
//!   client that saw a peer come online resolves names with it;
//! - while the bus subscription is down, notices may be missed: nothing is cached, and the
//!   whole cache is dropped when the subscription comes back;
//! - a notice whose publish failed is sent again, ahead of anything sent after it
//!   (`cluster::forward_in_order`);
//! - every answer is dropped after [`MAX_AGE`] anyway, bounding the harm of a notice that never
//!   went out: the registering pod died between its commit and the publish, or runs an older
//!   version that sends none (during a rolling upgrade).
//!
//! Answers are keyed by tenant first; a lookup never sees another tenant's entries.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

use crate::storage::store::PeerRecord;

/// Longest time an answer is used without a change notice.
pub const MAX_AGE: Duration = Duration::from_secs(10);

/// Answers kept at most, all tenants together; past it the cache starts over.
const MAX_ENTRIES: usize = 8192;

/// What was looked up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Lookup {
    /// Stored peers with this display name.
    Name,
    /// The stored peer with this id (zero or one).
    Id,
}

#[derive(Debug)]
struct Answer {
    at: Instant,
    peers: Arc<[PeerRecord]>,
}

#[derive(Debug, Default)]
struct Inner {
    /// False while change notices may be missed (the bus subscription is down).
    listening: bool,
    /// Bumped by every change: an answer read from the store before a change is not kept.
    epoch: u64,
    entries: usize,
    /// Tenant → (lookup, key) → answer.
    tenants: HashMap<String, HashMap<(Lookup, String), Answer>>,
}

/// The cache; one per pod.
#[derive(Debug)]
pub struct Directory {
    inner: Mutex<Inner>,
}

impl Directory {
    /// A cache that keeps answers from the start (`listening`: a single process, whose own
    /// registrations are the only changes) or only once [`Directory::resume`] says change
    /// notices are heard.
    pub fn new(listening: bool) -> Self {
        Self {
            inner: Mutex::new(Inner {
                listening,
                ..Inner::default()
            }),
        }
    }

    #[allow(clippy::unwrap_used)] // a poisoned lock only follows a panic elsewhere
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap()
    }

    /// The stored peers for `(lookup, key)` in `tenant_id`: the kept answer, or `fetch`'s
    /// (kept unless a change came in while it ran).
    pub async fn get<F, Fut, E>(
        &self,
        tenant_id: &str,
        lookup: Lookup,
        key: &str,
        fetch: F,
    ) -> Result<Arc<[PeerRecord]>, E>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<Vec<PeerRecord>, E>>,
    {
        let epoch = {
            let inner = self.lock();
            let kept = inner
                .tenants
                .get(tenant_id)
                .and_then(|t| t.get(&(lookup, key.to_owned())))
                .filter(|a| a.at.elapsed() < MAX_AGE);
            if let Some(answer) = kept {
                return Ok(answer.peers.clone());
            }
            inner.epoch
        };
        let peers: Arc<[PeerRecord]> = fetch().await?.into();
        let mut inner = self.lock();
        if inner.listening && inner.epoch == epoch {
            if inner.entries >= MAX_ENTRIES {
                inner.tenants.clear();
                inner.entries = 0;
            }
            let answer = Answer {
                at: Instant::now(),
                peers: peers.clone(),
            };
            let replaced = inner
                .tenants
                .entry(tenant_id.to_owned())
                .or_default()
                .insert((lookup, key.to_owned()), answer);
            if replaced.is_none() {
                inner.entries += 1;
            }
        }
        Ok(peers)
    }

    /// A peer of `tenant_id` was stored (registered, renamed, moved): its answers go.
    pub fn changed(&self, tenant_id: &str) {
        let mut inner = self.lock();
        inner.epoch += 1;
        if let Some(gone) = inner.tenants.remove(tenant_id) {
            inner.entries -= gone.len();
        }
    }

    /// Change notices may be missed from now on: keep nothing, and drop what is kept.
    pub fn suspend(&self) {
        self.reset(false);
    }

    /// Change notices are heard again: start over (some may have been missed meanwhile).
    pub fn resume(&self) {
        self.reset(true);
    }

    fn reset(&self, listening: bool) {
        let mut inner = self.lock();
        inner.listening = listening;
        inner.epoch += 1;
        inner.tenants.clear();
        inner.entries = 0;
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    fn peer(tenant: &str, id: &str, name: &str) -> PeerRecord {
        PeerRecord::for_tests(tenant, id, name, "dev")
    }

    /// A fake store: answers `peers` for any lookup and counts the reads.
    struct Source {
        reads: AtomicUsize,
        peers: Mutex<Vec<PeerRecord>>,
    }

    impl Source {
        fn new(peers: Vec<PeerRecord>) -> Self {
            Self {
                reads: AtomicUsize::new(0),
                peers: Mutex::new(peers),
            }
        }

        async fn read(&self) -> Result<Vec<PeerRecord>, String> {
            self.reads.fetch_add(1, Ordering::SeqCst);
            Ok(self.peers.lock().expect("lock").clone())
        }

        fn reads(&self) -> usize {
            self.reads.load(Ordering::SeqCst)
        }
    }

    fn ids(peers: &[PeerRecord]) -> Vec<&str> {
        peers.iter().map(|p| p.peer_id.as_str()).collect()
    }

    #[tokio::test(start_paused = true)]
    async fn an_answer_is_kept_until_its_tenant_changes_or_it_ages() {
        let dir = Directory::new(true);
        let store = Source::new(vec![peer("t1", "p1", "bob")]);
        for _ in 0..3 {
            let got = dir.get("t1", Lookup::Name, "bob", || store.read()).await;
            assert_eq!(ids(&got.expect("read")), ["p1"]);
        }
        assert_eq!(store.reads(), 1, "one read, then the kept answer");

        store
            .peers
            .lock()
            .expect("lock")
            .push(peer("t1", "p2", "bob"));
        dir.changed("t1");
        let got = dir.get("t1", Lookup::Name, "bob", || store.read()).await;
        assert_eq!(
            ids(&got.expect("read")),
            ["p1", "p2"],
            "a change is seen at once"
        );
        assert_eq!(store.reads(), 2);

        tokio::time::advance(MAX_AGE).await;
        let _ = dir.get("t1", Lookup::Name, "bob", || store.read()).await;
        assert_eq!(
            store.reads(),
            3,
            "an answer as old as MAX_AGE is read again"
        );
    }

    #[tokio::test]
    async fn tenants_and_lookups_never_share_answers() {
        let dir = Directory::new(true);
        let t1 = Source::new(vec![peer("t1", "p1", "bob")]);
        let t2 = Source::new(vec![peer("t2", "p9", "bob")]);
        let by_id = Source::new(vec![]);
        let a = dir.get("t1", Lookup::Name, "bob", || t1.read()).await;
        let b = dir.get("t2", Lookup::Name, "bob", || t2.read()).await;
        let c = dir.get("t1", Lookup::Id, "bob", || by_id.read()).await;
        assert_eq!(ids(&a.expect("t1")), ["p1"]);
        assert_eq!(
            ids(&b.expect("t2")),
            ["p9"],
            "the same name in another tenant is its own"
        );
        assert!(
            c.expect("id").is_empty(),
            "an id lookup is not a name lookup"
        );

        // A change in t2 leaves t1's answer kept.
        dir.changed("t2");
        let _ = dir.get("t1", Lookup::Name, "bob", || t1.read()).await;
        let _ = dir.get("t2", Lookup::Name, "bob", || t2.read()).await;
        assert_eq!((t1.reads(), t2.reads()), (1, 2));
    }

    #[tokio::test]
    async fn an_answer_read_across_a_change_is_not_kept() {
        let dir = Directory::new(true);
        let store = Source::new(vec![peer("t1", "p1", "bob")]);
        // The change lands while the read is in flight (the read saw the old rows).
        let got = dir
            .get("t1", Lookup::Name, "bob", || async {
                let old = store.read().await;
                dir.changed("t1");
                old
            })
            .await;
        assert_eq!(ids(&got.expect("read")), ["p1"]);
        let _ = dir.get("t1", Lookup::Name, "bob", || store.read()).await;
        assert_eq!(
            store.reads(),
            2,
            "the answer from before the change was not kept"
        );
    }

    #[tokio::test]
    async fn nothing_is_kept_while_notices_may_be_missed() {
        let dir = Directory::new(false);
        let store = Source::new(vec![peer("t1", "p1", "bob")]);
        for _ in 0..2 {
            let _ = dir.get("t1", Lookup::Name, "bob", || store.read()).await;
        }
        assert_eq!(store.reads(), 2, "not listening yet: every lookup reads");

        dir.resume();
        for _ in 0..2 {
            let _ = dir.get("t1", Lookup::Name, "bob", || store.read()).await;
        }
        assert_eq!(store.reads(), 3, "listening: kept");

        dir.suspend();
        let _ = dir.get("t1", Lookup::Name, "bob", || store.read()).await;
        assert_eq!(store.reads(), 4, "suspended: what was kept is gone");
        let _ = dir.get("t1", Lookup::Name, "bob", || store.read()).await;
        assert_eq!(store.reads(), 5, "and nothing new is kept");
    }

    #[tokio::test]
    async fn a_failed_read_is_not_kept() {
        let dir = Directory::new(true);
        let failed = dir
            .get("t1", Lookup::Name, "bob", || async {
                Err::<Vec<PeerRecord>, _>("down")
            })
            .await;
        assert_eq!(failed.map(|p| p.len()), Err("down"));
        let store = Source::new(vec![peer("t1", "p1", "bob")]);
        let got = dir.get("t1", Lookup::Name, "bob", || store.read()).await;
        assert_eq!(ids(&got.expect("read")), ["p1"]);
    }
}

//! A connection's outbound queue, bounded in frames *and* in bytes, per connection and across
//! the process.
//!
//! A frame may be up to ~1 MiB, so a queue bounded only in frames (1 024) let one peer that
//! stopped reading hold ~200 MB of the relay's memory (issue 30). Every queued frame's bytes
//! are counted against its connection's cap and the process's budget from the moment it is
//! queued until the connection task takes it out (or drops the queue); a push that would pass
//! either bound is refused, and the pusher closes the connection as a slow consumer (4008), as
//! for a queue full of frames. Bulk senders (catch-up, replay) wait for room instead, leaving
//! headroom in frames and bytes for the live frames pushed meanwhile.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::mpsc;

use super::Outbound;

/// Free frame slots a bulk sender leaves in a connection's queue.
const BULK_HEADROOM_FRAMES: usize = 64;

/// How long a bulk sender waits between looks at a full queue.
const BULK_POLL: Duration = Duration::from_millis(2);

/// Bytes queued across every connection of this process, against a budget.
#[derive(Debug)]
pub struct Budget {
    used: AtomicUsize,
    cap: usize,
}

impl Budget {
    /// A budget of `cap` bytes (0: unbounded).
    pub fn new(cap: usize) -> Arc<Self> {
        Arc::new(Self {
            used: AtomicUsize::new(0),
            cap: if cap == 0 { usize::MAX } else { cap },
        })
    }

    /// Bytes queued now.
    pub fn used(&self) -> usize {
        self.used.load(Ordering::Relaxed)
    }
}

/// The byte counts one queue keeps: its own, and the process's budget. Every push runs under
/// `sending`, and so does the receiver's final drain: a frame is either counted and in the
/// channel, where a receive or the drain gives its bytes back, or refused and not counted.
#[derive(Debug)]
struct Bytes {
    queued: AtomicUsize,
    cap: usize,
    budget: Arc<Budget>,
    sending: std::sync::Mutex<()>,
}

impl Bytes {
    fn lock(&self) -> std::sync::MutexGuard<'_, ()> {
        self.sending.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Counts `n` bytes if both bounds allow it with `reserve` (a share of each bound, in
    /// quarters: 0 or 1) left free.
    fn take(&self, n: usize, reserve_quarters: usize) -> bool {
        let conn = self.queued.fetch_add(n, Ordering::AcqRel) + n;
        let pod = self.budget.used.fetch_add(n, Ordering::AcqRel) + n;
        let room = |cap: usize| cap.saturating_sub(cap / 4 * reserve_quarters);
        // A frame larger than the room always fits an empty queue: otherwise a bulk sender
        // could wait forever for room that never comes.
        let conn_ok = conn <= room(self.cap) || conn == n;
        let pod_ok = pod <= room(self.budget.cap) || pod == n;
        if conn_ok && pod_ok {
            true
        } else {
            self.give(n);
            false
        }
    }

    fn give(&self, n: usize) {
        self.queued.fetch_sub(n, Ordering::AcqRel);
        self.budget.used.fetch_sub(n, Ordering::AcqRel);
    }
}

/// Why a push was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PushError {
    /// The queue is full (frames, bytes, or the process's budget): a slow consumer.
    Full,
    /// The connection is gone.
    Closed,
}

/// The pushing side of a connection's queue (cheap to clone).
#[derive(Debug, Clone)]
pub struct OutSender {
    tx: mpsc::Sender<Outbound>,
    bytes: Arc<Bytes>,
}

/// The connection task's side.
#[derive(Debug)]
pub struct OutReceiver {
    rx: mpsc::Receiver<Outbound>,
    bytes: Arc<Bytes>,
}

/// A queue of at most `frames` frames and `cap_bytes` bytes (0: no byte cap), drawing on
/// `budget`.
pub fn queue(frames: usize, cap_bytes: usize, budget: Arc<Budget>) -> (OutSender, OutReceiver) {
    let (tx, rx) = mpsc::channel(frames.max(1));
    let bytes = Arc::new(Bytes {
        queued: AtomicUsize::new(0),
        cap: if cap_bytes == 0 {
            usize::MAX
        } else {
            cap_bytes
        },
        budget,
        sending: std::sync::Mutex::new(()),
    });
    (
        OutSender {
            tx,
            bytes: bytes.clone(),
        },
        OutReceiver { rx, bytes },
    )
}

impl OutSender {
    /// Queues a frame now, or refuses it.
    pub fn try_push(&self, frame: Outbound) -> Result<(), PushError> {
        self.push(frame, 0).map_err(|(e, _)| e)
    }

    /// Queues `frame` if the queue has room for it with `reserve_quarters` of each byte bound
    /// left free; gives it back when it does not fit.
    fn push(&self, frame: Outbound, reserve_quarters: usize) -> Result<(), (PushError, Outbound)> {
        let n = frame.len();
        let _sending = self.bytes.lock();
        if self.tx.is_closed() {
            return Err((PushError::Closed, frame));
        }
        if !self.bytes.take(n, reserve_quarters) {
            return Err((PushError::Full, frame));
        }
        self.tx.try_send(frame).map_err(|e| {
            self.bytes.give(n);
            match e {
                mpsc::error::TrySendError::Full(f) => (PushError::Full, f),
                mpsc::error::TrySendError::Closed(f) => (PushError::Closed, f),
            }
        })
    }

    /// Queues a frame from a bulk stream (catch-up, replay): waits until the queue has room for
    /// it with [`BULK_HEADROOM_FRAMES`] slots and a quarter of its byte cap and of the
    /// process's budget still free, so live frames pushed meanwhile do not find it full. It
    /// polls rather than reserving: tokio's `reserve_many` would hold the slots it gathered
    /// while waiting, starving the very pushes the headroom is for. False if the connection is
    /// gone. Cancel-safe: nothing is counted across an await.
    pub async fn send_bulk(&self, frame: Outbound) -> bool {
        let slots = BULK_HEADROOM_FRAMES.min(self.tx.max_capacity().saturating_sub(1));
        let mut frame = frame;
        loop {
            if self.tx.is_closed() {
                return false;
            }
            if self.tx.capacity() > slots {
                match self.push(frame, 1) {
                    Ok(()) => return true,
                    Err((PushError::Closed, _)) => return false,
                    Err((PushError::Full, back)) => frame = back,
                }
            }
            tokio::time::sleep(BULK_POLL).await;
        }
    }

    /// True once the connection task dropped its side.
    pub fn is_closed(&self) -> bool {
        self.tx.is_closed()
    }

    /// Bytes queued on this connection now.
    pub fn queued_bytes(&self) -> usize {
        self.bytes.queued.load(Ordering::Relaxed)
    }
}

impl OutReceiver {
    /// The next frame; `None` once every sender is gone.
    pub async fn recv(&mut self) -> Option<Outbound> {
        let frame = self.rx.recv().await?;
        self.bytes.give(frame.len());
        Some(frame)
    }

    /// The next frame if one is queued.
    pub fn try_recv(&mut self) -> Option<Outbound> {
        let frame = self.rx.try_recv().ok()?;
        self.bytes.give(frame.len());
        Some(frame)
    }
}

impl Drop for OutReceiver {
    /// What is still queued when the connection ends no longer counts against the budget. No
    /// push runs meanwhile (they hold the same lock), so nothing lands after the drain.
    fn drop(&mut self) {
        let _sending = self.bytes.lock();
        self.rx.close();
        while let Ok(frame) = self.rx.try_recv() {
            self.bytes.give(frame.len());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(n: usize) -> Outbound {
        "x".repeat(n).into_boxed_str()
    }

    #[test]
    fn a_push_past_the_byte_cap_is_refused_and_counts_nothing() {
        let budget = Budget::new(0);
        let (tx, mut rx) = queue(1024, 100, budget.clone());
        assert_eq!(tx.try_push(frame(60)), Ok(()));
        assert_eq!(tx.try_push(frame(60)), Err(PushError::Full));
        assert_eq!((tx.queued_bytes(), budget.used()), (60, 60));
        assert_eq!(rx.try_recv().map(|f| f.len()), Some(60));
        assert_eq!((tx.queued_bytes(), budget.used()), (0, 0));
        assert_eq!(tx.try_push(frame(60)), Ok(()));
    }

    #[test]
    fn the_process_budget_bounds_every_queue_together() {
        let budget = Budget::new(100);
        let (a, _ra) = queue(1024, 0, budget.clone());
        let (b, rb) = queue(1024, 0, budget.clone());
        assert_eq!(a.try_push(frame(70)), Ok(()));
        assert_eq!(b.try_push(frame(40)), Err(PushError::Full));
        assert_eq!(b.try_push(frame(30)), Ok(()));
        // A connection that ends gives back what it still had queued.
        drop(rb);
        assert_eq!(budget.used(), 70);
        assert_eq!(b.try_push(frame(1)), Err(PushError::Closed));
        assert_eq!(budget.used(), 70);
    }

    #[test]
    fn a_frame_larger_than_the_cap_still_fits_an_empty_queue() {
        let (tx, _rx) = queue(1024, 10, Budget::new(0));
        assert_eq!(tx.try_push(frame(50)), Ok(()));
        assert_eq!(tx.try_push(frame(1)), Err(PushError::Full));
    }

    #[test]
    fn a_queue_full_of_frames_is_full_whatever_its_bytes() {
        let (tx, _rx) = queue(2, 0, Budget::new(0));
        assert_eq!(tx.try_push(frame(1)), Ok(()));
        assert_eq!(tx.try_push(frame(1)), Ok(()));
        assert_eq!(tx.try_push(frame(1)), Err(PushError::Full));
        assert_eq!(tx.queued_bytes(), 2, "the refused frame is not counted");
    }

    #[tokio::test(start_paused = true)]
    async fn a_bulk_sender_without_a_connection_cap_is_held_only_by_the_process_budget() {
        let budget = Budget::new(1000);
        let (tx, _rx) = queue(1024, 0, budget.clone());
        let (other, _other_rx) = queue(1024, 0, budget.clone());
        assert_eq!(other.try_push(frame(100)), Ok(()));
        // 100 + 600 is within 1000 - 1000/4: the bulk frame goes at once.
        assert!(tx.send_bulk(frame(600)).await);
        assert_eq!(budget.used(), 700);
    }

    #[tokio::test(start_paused = true)]
    async fn a_bulk_sender_waits_for_byte_room_and_leaves_headroom_for_live_frames() {
        let (tx, mut rx) = queue(1024, 400, Budget::new(0));
        assert_eq!(tx.try_push(frame(250)), Ok(()));
        // 250 + 100 would pass 400 - 400/4 = 300: the bulk frame waits.
        let bulk = tokio::spawn({
            let tx = tx.clone();
            async move { tx.send_bulk(frame(100)).await }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!bulk.is_finished());
        // A live frame still fits beside the waiting one.
        assert_eq!(tx.try_push(frame(100)), Ok(()));
        assert_eq!(rx.recv().await.map(|f| f.len()), Some(250));
        assert_eq!(rx.recv().await.map(|f| f.len()), Some(100));
        assert!(bulk.await.expect("task"));
        assert_eq!(rx.recv().await.map(|f| f.len()), Some(100));
        assert_eq!(tx.queued_bytes(), 0);
    }
}

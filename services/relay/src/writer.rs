//! The write path: one task that commits writes in batches (group commit) and, after each
//! commit, hands every outcome to the [`AfterCommit`] dispatcher in commit order.
//!
//! Batching needs no timer: the task takes the first waiting job, then whatever else is
//! already queued (up to the batch limit), and commits them in one transaction. Under light
//! load a batch is one write; under heavy load the queue fills while a commit is in flight and
//! the next batch is large. Nothing is acknowledged before its transaction commits.
//! Dispatching from this task (not from the submitters) keeps deliveries to each recipient in
//! inbox order.

use std::sync::Arc;
use std::time::Instant;

use repowire_protocol::{MessageId, PeerSummary};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use crate::hub::ConnId;
use crate::metrics::Metrics;
use crate::store::{Store, StoreError, WriteOp, WriteOutcome};

/// Who submitted a write and how to answer them.
#[derive(Debug, Clone)]
pub struct Origin {
    /// Tenant.
    pub tenant_id: String,
    /// Connection to answer on.
    pub conn: ConnId,
    /// The request frame.
    pub re: MessageId,
    /// Recipients resolved before the write, to name them in `accepted`.
    pub recipients: Vec<PeerSummary>,
    /// When the frame arrived.
    pub started: Instant,
}

/// Receives outcomes after commit, in commit order. Must not block.
pub trait AfterCommit: Send + Sync + 'static {
    /// A committed op.
    fn committed(&self, op: &WriteOp, outcome: &WriteOutcome, origin: Option<&Origin>);
    /// An op whose transaction failed: nothing of it was stored.
    fn failed(&self, op: &WriteOp, error: &StoreError, origin: Option<&Origin>);
}

type Done = oneshot::Sender<Result<WriteOutcome, String>>;

enum Job {
    /// Boxed: a write carries a whole message, a flush only a sender.
    Write(Box<(WriteOp, Option<Origin>, Option<Done>)>),
    Flush(oneshot::Sender<()>),
}

/// Handle to the writer task.
#[derive(Clone)]
pub struct Writer {
    tx: mpsc::UnboundedSender<Job>,
}

impl std::fmt::Debug for Writer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Writer").finish_non_exhaustive()
    }
}

/// The writer task is gone (the process is shutting down).
#[derive(Debug, thiserror::Error)]
#[error("the relay is shutting down")]
pub struct WriterClosed;

impl Writer {
    /// Starts the writer task.
    pub fn spawn(
        store: Arc<dyn Store>,
        after: Arc<dyn AfterCommit>,
        metrics: Arc<Metrics>,
        max_batch: usize,
    ) -> (Self, JoinHandle<()>) {
        // Unbounded on purpose: every job belongs to a frame a connection already read, and
        // connections are bounded (count, frame size, outbound queue), so the queue is bounded
        // by what the relay has admitted; a bounded channel here would only move the wait.
        let (tx, rx) = mpsc::unbounded_channel();
        let task = tokio::spawn(run(rx, store, after, metrics, max_batch.max(1)));
        (Self { tx }, task)
    }

    /// Queues a write; its outcome goes to the dispatcher (answering `origin`).
    pub fn submit(&self, op: WriteOp, origin: Option<Origin>) -> Result<(), WriterClosed> {
        self.tx
            .send(Job::Write(Box::new((op, origin, None))))
            .map_err(|_| WriterClosed)
    }

    /// Writes and waits for the outcome (also dispatched). `Err` carries the storage error.
    pub async fn write(&self, op: WriteOp) -> Result<Result<WriteOutcome, String>, WriterClosed> {
        let (done, rx) = oneshot::channel();
        self.tx
            .send(Job::Write(Box::new((op, None, Some(done)))))
            .map_err(|_| WriterClosed)?;
        rx.await.map_err(|_| WriterClosed)
    }

    /// Waits until every write queued before this call is committed or failed.
    pub async fn flush(&self) -> Result<(), WriterClosed> {
        let (done, rx) = oneshot::channel();
        self.tx.send(Job::Flush(done)).map_err(|_| WriterClosed)?;
        rx.await.map_err(|_| WriterClosed)
    }
}

async fn run(
    mut rx: mpsc::UnboundedReceiver<Job>,
    store: Arc<dyn Store>,
    after: Arc<dyn AfterCommit>,
    metrics: Arc<Metrics>,
    max_batch: usize,
) {
    let mut batch = Vec::with_capacity(max_batch);
    let mut flushes = Vec::new();
    while let Some(first) = rx.recv().await {
        let mut next = Some(first);
        while let Some(job) = next.take() {
            match job {
                Job::Write(job) => batch.push(*job),
                Job::Flush(done) => {
                    flushes.push(done);
                    break;
                }
            }
            if batch.len() < max_batch {
                next = rx.try_recv().ok();
            }
        }
        if !batch.is_empty() {
            let ops: Vec<WriteOp> = batch.iter().map(|(op, _, _)| op.clone()).collect();
            metrics.write_batch_size.observe(ops.len() as f64);
            let started = Instant::now();
            let applied = store.apply(&ops).await;
            metrics
                .write_batch_seconds
                .observe(started.elapsed().as_secs_f64());
            match applied {
                Ok(outcomes) => {
                    for ((op, origin, done), outcome) in batch.drain(..).zip(outcomes) {
                        finish(after.as_ref(), op, origin, done, Ok(Some(outcome)));
                    }
                }
                Err(error) if batch.len() > 1 => {
                    // One bad write must not fail the others (they may belong to other
                    // tenants): the transaction rolled back whole, so retry each alone.
                    tracing::warn!(%error, writes = batch.len(), "write batch failed; retrying each write alone");
                    for (op, origin, done) in batch.drain(..) {
                        let result = store.apply(std::slice::from_ref(&op)).await;
                        finish(
                            after.as_ref(),
                            op,
                            origin,
                            done,
                            result.map(|mut o| o.pop()),
                        );
                    }
                }
                Err(error) => {
                    tracing::warn!(%error, "write failed; nothing of it was stored");
                    if let Some((op, origin, done)) = batch.pop() {
                        finish(after.as_ref(), op, origin, done, Err(error));
                    }
                }
            }
        }
        for done in flushes.drain(..) {
            let _ = done.send(());
        }
    }
}

/// Hands one write's result to the dispatcher and to a waiting caller.
fn finish(
    after: &dyn AfterCommit,
    op: WriteOp,
    origin: Option<Origin>,
    done: Option<Done>,
    result: Result<Option<WriteOutcome>, StoreError>,
) {
    match result {
        Ok(Some(outcome)) => {
            after.committed(&op, &outcome, origin.as_ref());
            if let Some(done) = done {
                let _ = done.send(Ok(outcome));
            }
        }
        Ok(None) => tracing::error!(?op, "store returned no outcome for a write"),
        Err(error) => {
            after.failed(&op, &error, origin.as_ref());
            if let Some(done) = done {
                let _ = done.send(Err(error.to_string()));
            }
        }
    }
}

//! Storage: the `Store` (SQLite embedded, Postgres across pods), the single writer that
//! commits batches in order, and the embedded relay's private data directory and secret files.

pub mod datadir;
pub mod store;
pub mod writer;

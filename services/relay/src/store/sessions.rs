//! Session bindings in storage: one row per Repowire session (`rs-…`) of a tenant, and the
//! runtime session ids that lead to it. Pointers only: the transcript's path and how far it was
//! read, never its text.

/// A Repowire session as stored.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct SessionRecord {
    /// Tenant.
    pub tenant_id: String,
    /// `rs-…`.
    pub session_id: String,
    /// Agent runtime.
    pub backend: String,
    /// Its executor's circle.
    pub circle: String,
    /// Working directory.
    pub project_path: Option<String>,
    /// Its executor's machine.
    pub machine: Option<String>,
    /// The current (or last) executor peer.
    pub executor_peer_id: Option<String>,
    /// The transcript file.
    pub transcript_path: Option<String>,
    /// How far it was read (bytes).
    pub transcript_cursor: Option<i64>,
    /// First bound (ms).
    pub created_at_ms: i64,
    /// Last bound (ms).
    pub last_seen_ms: i64,
}

/// A binding to record: `peer_id` executes a work stream now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionBind {
    /// Tenant.
    pub tenant_id: String,
    /// The session the client knows this work stream as, if it knows one.
    pub session_id: Option<String>,
    /// The runtime's id of the session it runs now.
    pub runtime_session_id: String,
    /// The executor peer.
    pub peer_id: String,
    /// Its backend: a known session is only taken over by the same runtime.
    pub backend: String,
    /// Its circle.
    pub circle: String,
    /// Its working directory.
    pub project_path: Option<String>,
    /// Its machine.
    pub machine: Option<String>,
    /// The transcript file.
    pub transcript_path: Option<String>,
    /// How far it was read.
    pub transcript_cursor: Option<i64>,
    /// The id a new session gets.
    pub new_session_id: String,
    /// Time (ms).
    pub now_ms: i64,
}

/// A session and its runtime session ids, oldest first.
pub type SessionWithRuntimes = (SessionRecord, Vec<String>);

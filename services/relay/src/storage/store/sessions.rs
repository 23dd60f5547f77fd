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
    /// The session to bind (found by the caller, see [`super::Store::find_session`]); `None`:
    /// a new one, `new_session_id`.
    pub session_id: Option<String>,
    /// The executor the caller found `session_id` with, which it judged may be replaced (the
    /// binder itself, or a peer no longer live). Bound only if that is still its executor;
    /// otherwise (another binder came first) a new session is bound instead, and the runtime id
    /// keeps leading to the other.
    pub expected_executor: Option<String>,
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
    /// The runtime id leads to this session from now on, also if it led to another before.
    /// False when the binder was refused that other session (a live peer executes it): the
    /// runtime id keeps leading there.
    pub claim_runtime: bool,
    /// Time (ms).
    pub now_ms: i64,
}

/// A session and its runtime session ids, oldest first.
pub type SessionWithRuntimes = (SessionRecord, Vec<String>);

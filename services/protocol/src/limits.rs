//! Size limits. Over a limit is an explicit error, never a truncation.

/// Largest frame (one WebSocket text message), in bytes of UTF-8.
///
/// Sized so that every frame whose fields are within the other limits fits however a standard
/// JSON encoder escapes it. The field limits count decoded bytes; an encoder may write any
/// character as a `\uXXXX` escape (Python's default does for non-ASCII, Go's for `<`, `>` and
/// `&`, all do for control characters), at most 6 bytes of frame per byte of text. The largest
/// frame is an `ask` with a 32 KiB text and 32 options of 512-byte labels and 64-byte ids:
/// 6 × (32 768 + 32 × 512 + 32 × 64 + names and ids) + structure = 309 593 bytes with every
/// character escaped (`tests/edges.rs` builds it).
/// 512 KiB leaves room; the transport limit (1 MiB) stays above it.
pub const MAX_FRAME_BYTES: usize = 512 * 1024;
/// Largest WebSocket message the relay reads at all; a larger one closes the connection (1009).
pub const MAX_TRANSPORT_BYTES: usize = 1024 * 1024;
/// Largest message text (`text` of ask/notify/broadcast, `reply` of ack), in bytes of UTF-8.
pub const MAX_TEXT_BYTES: usize = 32 * 1024;
/// Display names, circles and `to` targets.
pub const MAX_NAME_BYTES: usize = 64;
/// Peer descriptions (short task state).
pub const MAX_DESCRIPTION_BYTES: usize = 512;
/// Working-directory paths and other free-form metadata strings.
pub const MAX_PATH_BYTES: usize = 4096;
/// Backend names (`claude-code`, `codex` …) and short identifiers.
pub const MAX_SHORT_BYTES: usize = 64;
/// Options of a structured question.
pub const MAX_QUESTION_OPTIONS: usize = 32;
/// Reason strings in receipts.
pub const MAX_REASON_BYTES: usize = 512;
/// Values of the shared state (`state_set`).
pub const MAX_STATE_VALUE_BYTES: usize = 8 * 1024;
/// Most peers in one `peers` answer (and the default of `list_peers.limit`): a page of peers
/// with 512-byte descriptions stays far below the transport limit.
pub const MAX_PEERS_PAGE: u32 = 500;
/// Longest `list_peers.cursor` (a circle, a name and a peer id).
pub const MAX_CURSOR_BYTES: usize = 256;
/// Keys of one circle's shared state.
pub const MAX_STATE_KEYS: usize = 256;

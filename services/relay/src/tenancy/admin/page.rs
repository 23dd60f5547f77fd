//! Pagination, the same on every list: `?limit=` (1–500, default 100) and `?cursor=` (opaque,
//! from the previous page's `next_cursor`); the answer is `{"items": [...], "next_cursor":
//! "..." | null}` in a stable order (creation time, then id).

use serde::Deserialize;

use super::AdminError;

/// Largest page.
pub const MAX_LIMIT: u32 = 500;
/// Page size when none is asked for.
pub const DEFAULT_LIMIT: u32 = 100;

/// `?limit=&cursor=`.
#[derive(Debug, Clone, Default, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::IntoParams))]
#[cfg_attr(feature = "openapi", into_params(parameter_in = Query))]
#[serde(deny_unknown_fields)]
pub struct PageQuery {
    /// Items per page, 1–500 (default 100).
    #[cfg_attr(feature = "openapi", param(minimum = 1, maximum = 500))]
    pub limit: Option<u32>,
    /// Where to continue: the previous page's `next_cursor`.
    pub cursor: Option<String>,
}

impl PageQuery {
    /// The page size, checked.
    pub fn limit(&self) -> Result<i64, AdminError> {
        match self.limit.unwrap_or(DEFAULT_LIMIT) {
            n @ 1..=MAX_LIMIT => Ok(i64::from(n)),
            n => Err(AdminError::Invalid(format!(
                "limit is {n}; it must be 1 to {MAX_LIMIT}"
            ))),
        }
    }

    /// The position the cursor names, checked.
    pub fn after(&self) -> Result<Option<(i64, String)>, AdminError> {
        let Some(cursor) = &self.cursor else {
            return Ok(None);
        };
        cursor
            .split_once('.')
            .and_then(|(at, id)| Some((at.parse::<i64>().ok()?, id.to_owned())))
            .filter(|(_, id)| !id.is_empty())
            .map(Some)
            .ok_or_else(|| AdminError::Invalid(format!("`{cursor}` is not a cursor of this list")))
    }
}

/// The cursor after an item at `(created_at_ms, id)`, when the page was full.
pub fn next_cursor(full: bool, last: Option<(i64, &str)>) -> Option<String> {
    match (full, last) {
        (true, Some((at, id))) => Some(format!("{at}.{id}")),
        _ => None,
    }
}

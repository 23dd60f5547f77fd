//! Our MCP tools in Claude Code's `permissions.allow` (`~/.claude/settings.json`), so that an
//! agent calls `ask`, `ack`, `answer`… without a person approving each call: an agent that
//! cannot ack without a human is not a peer. Only `mcp__repowire__<tool>` entries for the tools
//! our server offers (no wildcard); the user's other rules are never touched.

use anyhow::Context;
use serde_json::{Map, Value};

/// Claude Code's name of one of our tools.
const PREFIX: &str = "mcp__repowire__";

/// The entries `setup --allow-tools` adds: one per tool of our MCP server.
pub fn entries() -> Vec<String> {
    crate::mcp::RepowireMcp::tool_names()
        .into_iter()
        .map(|t| format!("{PREFIX}{t}"))
        .collect()
}

fn allow_list(settings: &Value) -> Vec<&str> {
    settings
        .get("permissions")
        .and_then(|p| p.get("allow"))
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

/// Our entries not in `permissions.allow` yet.
pub fn missing(settings: &Value) -> Vec<String> {
    let allowed = allow_list(settings);
    entries()
        .into_iter()
        .filter(|e| !allowed.contains(&e.as_str()))
        .collect()
}

/// Settings with our entries added at the end of `permissions.allow` (created if absent).
pub fn merge(mut settings: Value) -> anyhow::Result<Value> {
    let add = missing(&settings);
    if add.is_empty() {
        return Ok(settings);
    }
    let allow = settings
        .as_object_mut()
        .context("settings.json is not a JSON object")?
        .entry("permissions")
        .or_insert_with(|| Value::Object(Map::new()))
        .as_object_mut()
        .context("`permissions` in settings.json is not an object")?
        .entry("allow")
        .or_insert_with(|| Value::Array(Vec::new()))
        .as_array_mut()
        .context("`permissions.allow` in settings.json is not an array")?;
    allow.extend(add.into_iter().map(Value::String));
    Ok(settings)
}

/// Settings without entries for our server's tools (also those of tools it no longer has);
/// `permissions.allow`, then `permissions`, dropped if that leaves them empty.
pub fn remove(mut settings: Value) -> Value {
    let Some(permissions) = settings
        .get_mut("permissions")
        .and_then(Value::as_object_mut)
    else {
        return settings;
    };
    if let Some(allow) = permissions.get_mut("allow").and_then(Value::as_array_mut) {
        let before = allow.len();
        allow.retain(|e| !e.as_str().is_some_and(|s| s.starts_with(PREFIX)));
        if allow.is_empty() && before > 0 {
            permissions.remove("allow");
        }
    }
    if permissions.is_empty()
        && let Some(root) = settings.as_object_mut()
    {
        root.remove("permissions");
    }
    settings
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a test's unwrap is its assertion
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn merge_adds_only_ours_once_and_remove_takes_only_ours() {
        let user = json!({"permissions": {"allow": ["Bash(ls:*)"], "deny": ["Read(.env)"]}, "model": "opus"});
        let merged = merge(user.clone()).unwrap();
        let allow = allow_list(&merged);
        assert_eq!(allow[0], "Bash(ls:*)");
        assert!(allow.contains(&"mcp__repowire__ack") && allow.contains(&"mcp__repowire__ask"));
        assert!(
            allow[1..].iter().all(|e| e.starts_with(PREFIX)),
            "{allow:?}"
        );
        assert_eq!(allow.len(), 1 + entries().len());
        assert_eq!(merge(merged.clone()).unwrap(), merged, "idempotent");
        assert!(missing(&merged).is_empty());
        assert_eq!(remove(merged), user);
        // Nothing of ours, nothing removed; a file with no permissions gains none.
        assert_eq!(remove(json!({"model": "opus"})), json!({"model": "opus"}));
        assert_eq!(
            remove(merge(json!({})).unwrap()),
            json!({}),
            "created by merge, dropped by remove"
        );
    }

    #[test]
    fn a_permissions_key_of_the_wrong_shape_is_refused() {
        assert!(merge(json!({"permissions": []})).is_err());
        assert!(merge(json!({"permissions": {"allow": "x"}})).is_err());
    }
}

//! The commands: each module owns one command family.

pub mod daemon;
pub mod hook;
pub mod peer;
pub mod session;
pub mod setup;

use std::time::Duration;

use serde_json::Value;

use crate::api::{self, CallError, Request};
use crate::config::Config;

/// Calls the daemon, turning "not running" into an error with a hint.
pub fn call(config: &Config, request: &Request, timeout: Duration) -> anyhow::Result<Value> {
    let socket = crate::config::socket_path(&config.home());
    match api::call(&socket, request, timeout) {
        Ok(v) => Ok(v),
        Err(CallError::NotRunning(why)) => Err(anyhow::anyhow!(
            "the repowire daemon is not running ({why})\nhint: start it with `repowire daemon start`"
        )),
        Err(CallError::Api(e)) => {
            let mut text = format!("{} ({})", e.message, e.code);
            for c in &e.candidates {
                text.push_str(&format!(
                    "\n  candidate: {} (peer {}, circle {})",
                    c.get("name").and_then(Value::as_str).unwrap_or("?"),
                    c.get("peer_id").and_then(Value::as_str).unwrap_or("?"),
                    c.get("circle").and_then(Value::as_str).unwrap_or("?"),
                ));
            }
            if let Some(h) = e.hint {
                text.push_str(&format!("\nhint: {h}"));
            }
            Err(anyhow::anyhow!(text))
        }
        Err(e) => Err(e.into()),
    }
}

//! The stand-in as an MCP client of the `repowire` server its runtime's config names (a real
//! rmcp client over stdio, started on first use).

use std::path::Path;

use serde_json::{Value, json};

use super::{Agent, Runtime, codex_config, gemini_settings};

/// A connected MCP client.
pub(super) struct Mcp {
    runtime: tokio::runtime::Runtime,
    client: rmcp::service::RunningService<rmcp::RoleClient, ()>,
}

pub(super) fn connect_mcp(runtime: Runtime, transcript: &Path) -> Result<Mcp, String> {
    use rmcp::ServiceExt;
    let (config, pointer) = match runtime {
        Runtime::Claude => {
            let home = std::env::var("HOME").unwrap_or_default();
            let config: Value = std::fs::read_to_string(Path::new(&home).join(".claude.json"))
                .ok()
                .and_then(|t| serde_json::from_str(&t).ok())
                .ok_or("no ~/.claude.json")?;
            (config, "/mcpServers/repowire")
        }
        Runtime::Codex => (codex_config(), "/mcp_servers/repowire"),
        Runtime::Gemini => (gemini_settings(), "/mcpServers/repowire"),
    };
    let server = config
        .pointer(pointer)
        .ok_or("no repowire MCP server in the runtime's config")?;
    let mut cmd = tokio::process::Command::new(server["command"].as_str().ok_or("no command")?);
    for a in server["args"].as_array().into_iter().flatten() {
        cmd.arg(a.as_str().unwrap_or(""));
    }
    for (k, v) in server["env"].as_object().into_iter().flatten() {
        cmd.env(k, v.as_str().unwrap_or(""));
    }
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(format!("{}.mcp.log", transcript.display()))
        .map_err(|e| e.to_string())?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let client = runtime.block_on(async {
        let (transport, _) = rmcp::transport::TokioChildProcess::builder(cmd)
            .stderr(log)
            .spawn()
            .map_err(|e| e.to_string())?;
        ().serve(transport).await.map_err(|e| e.to_string())
    })?;
    Ok(Mcp { runtime, client })
}

impl Agent {
    /// `TOOL {json}`: one MCP tool call, recorded as an `mcp` event.
    pub(super) fn mcp_call(&mut self, call: &str) {
        let (tool, args) = call.split_once(' ').unwrap_or((call, "{}"));
        let args: serde_json::Map<String, Value> = serde_json::from_str(args).unwrap_or_default();
        if self.mcp.is_none() {
            match connect_mcp(self.runtime, &self.transcript) {
                Ok(m) => self.mcp = Some(m),
                Err(e) => {
                    self.record(json!({ "event": "mcp", "tool": tool, "connect_error": e }));
                    return;
                }
            }
        }
        let Some(mcp) = &self.mcp else { return };
        let params = rmcp::model::CallToolRequestParams::new(tool.to_owned()).with_arguments(args);
        let result = mcp.runtime.block_on(mcp.client.call_tool(params));
        let event = match result {
            Ok(r) => {
                let text: Vec<String> = r
                    .content
                    .iter()
                    .filter_map(|c| c.as_text().map(|t| t.text.clone()))
                    .collect();
                json!({
                    "event": "mcp", "tool": tool, "is_error": r.is_error.unwrap_or(false),
                    "text": text.join("\n"), "structured": r.structured_content,
                })
            }
            Err(e) => json!({ "event": "mcp", "tool": tool, "call_error": e.to_string() }),
        };
        self.record(event);
    }
}

//! What runs each real agent CLI offline, against the mock model on 127.0.0.1: their
//! configuration before `repowire setup` adds to it, and their environment.

use std::path::Path;

use crate::agents::Home;

/// Codex's `config.toml` that runs it offline: the mock at `base_url` (`http://…/v1`) as the
/// model provider (its Responses API), and nothing that reaches the network
/// (docs/agents/codex.md).
pub fn codex_config(base_url: &str) -> String {
    format!(
        r#"model = "mock-model"
model_provider = "mock"
check_for_update_on_startup = false

[model_providers.mock]
name = "Mock"
base_url = "{base_url}"
env_key = "MOCK_API_KEY"
wire_api = "responses"

[features]
plugins = false
daemon_auto_start = false

[analytics]
enabled = false

[feedback]
enabled = false

[otel]
exporter = "none"
"#
    )
}

/// A model catalogue (written into `dir`) that describes the mock model as Codex's own
/// models are described online, and the top-level config.toml line that names it: Codex then
/// offers the model its patch tool, `apply_patch` (a freeform tool), which the fallback it uses
/// for an unknown model leaves out (docs/agents/codex.md).
pub fn codex_patch_catalog(dir: &Path) -> std::io::Result<String> {
    let catalog = dir.join("codex-models.json");
    let model = serde_json::json!({"models": [{
        "slug": "mock-model", "display_name": "Mock", "apply_patch_tool_type": "freeform",
        "supported_reasoning_levels": [], "shell_type": "default", "visibility": "list",
        "supported_in_api": false, "priority": 0, "support_verbosity": false,
        "truncation_policy": {"mode": "bytes", "limit": 10000},
        "experimental_supported_tools": [], "base_instructions": "You are a coding agent."
    }]});
    std::fs::write(&catalog, model.to_string())?;
    Ok(format!(
        "model_catalog_json = {:?}",
        catalog.to_string_lossy()
    ))
}

/// [`codex_config`] with [`codex_patch_catalog`] (written into `dir`).
pub fn codex_config_with_patches(base_url: &str, dir: &Path) -> std::io::Result<String> {
    Ok(format!(
        "{}\n{}",
        codex_patch_catalog(dir)?,
        codex_config(base_url)
    ))
}

/// Codex's config before `repowire setup` adds to it: the mock as the model provider (its
/// Responses API), and nothing that reaches the network (docs/agents/codex.md).
pub fn prepare_codex(home: &Home, model_url: &str) -> anyhow::Result<()> {
    let dir = home.path().join(".codex");
    std::fs::create_dir_all(&dir)?;
    std::fs::write(
        dir.join("config.toml"),
        codex_config(&format!("{model_url}/v1")),
    )?;
    Ok(())
}

/// Gemini CLI's settings before `repowire setup` adds to it: API-key auth against the mock,
/// nothing that reaches the network, and the project a trusted folder
/// (docs/agents/gemini-cli.md).
pub fn prepare_gemini(home: &Home, project: &Path) -> anyhow::Result<()> {
    let dir = home.path().join(".gemini");
    std::fs::create_dir_all(&dir)?;
    let settings = serde_json::json!({
        "security": {"auth": {"selectedType": "gemini-api-key"}},
        "general": {"enableAutoUpdate": false, "enableAutoUpdateNotification": false},
        "privacy": {"usageStatisticsEnabled": false},
        "telemetry": {"enabled": false},
        "ide": {"enabled": false},
        "model": {"name": "gemini-2.5-flash"}
    });
    std::fs::write(
        dir.join("settings.json"),
        serde_json::to_vec_pretty(&settings)?,
    )?;
    std::fs::write(
        dir.join("trustedFolders.json"),
        serde_json::to_vec(&serde_json::json!({ project.to_string_lossy(): "TRUST_FOLDER" }))?,
    )?;
    Ok(())
}

/// OpenCode's configuration before `repowire setup` adds to it: the mock as an
/// OpenAI-compatible provider, no update check, and the dependency install OpenCode starts for
/// a configuration directory with plugins marked done: offline it would hold startup for
/// about 74 s (docs/agents/opencode.md). Its environment needs
/// [`OPENCODE_OFFLINE`] too.
pub fn prepare_opencode(home: &Home, model_url: &str) -> anyhow::Result<()> {
    let dir = home.path().join(".config/opencode");
    std::fs::create_dir_all(dir.join("node_modules"))?;
    let config = serde_json::json!({
        "$schema": "https://opencode.ai/config.json",
        "autoupdate": false,
        "share": "disabled",
        "model": "mock/mock-model",
        "small_model": "mock/mock-model",
        "provider": {"mock": {"npm": "@ai-sdk/openai-compatible", "name": "Mock",
            "options": {"baseURL": format!("{model_url}/v1"), "apiKey": "offline-mock"},
            "models": {"mock-model": {"name": "Mock Model", "tool_call": true}}}}
    });
    std::fs::write(
        dir.join("opencode.json"),
        serde_json::to_vec_pretty(&config)?,
    )?;
    std::fs::write(
        dir.join("package-lock.json"),
        r#"{"name":"opencode-config","lockfileVersion":3,"requires":true,"packages":{"":{"dependencies":{"@opencode-ai/plugin":"*"}}}}"#,
    )?;
    Ok(())
}

/// What keeps OpenCode off the network: the models catalogue fetch, the update check, and the
/// rest (docs/agents/opencode.md).
pub const OPENCODE_OFFLINE: [(&str, &str); 5] = [
    ("OPENCODE_DISABLE_MODELS_FETCH", "1"),
    ("OPENCODE_DISABLE_AUTOUPDATE", "1"),
    ("OPENCODE_DISABLE_DEFAULT_PLUGINS", "1"),
    ("OPENCODE_DISABLE_LSP_DOWNLOAD", "1"),
    ("OPENCODE_DISABLE_SHARE", "1"),
];

//! Tool calls across runtimes, for approvals: the names Repowire's approvals use (Claude
//! Code's: `Bash`, `Edit`, `Write`, …), each runtime's own names for them, a call's input in
//! Claude Code's shape (what approvers are shown), and the answer in each runtime's shape.

use serde_json::{Map, Value, json};

use super::{Runtime, gemini};

/// Codex's and OpenCode's patch tool: it adds, changes and deletes files. Codex's hook
/// matchers take it for `Edit` and for `Write` (and `apply_patch`); the approvals gate it when
/// any of [`PATCH_GATES`] is gated, and ask it as the first of them that is
/// (docs/agents/codex.md).
const PATCH: &str = "apply_patch";

/// The approvals' names a patch is gated by, in the order it is asked as.
const PATCH_GATES: [&str; 3] = ["Edit", "Write", "MultiEdit"];

/// Keys OpenCode's tools never take: dropped from an OpenCode call before its own keys are
/// renamed to them, so that a model cannot show the approver one file and edit another.
const NOT_OPENCODE: [&str; 5] = [
    "file_path",
    "old_string",
    "new_string",
    "replace_all",
    "patch",
];

impl Runtime {
    /// The name Repowire's approvals (`[approvals] tools`) use for this runtime's tool
    /// `native`: Claude Code's names. Codex's hooks use them for its shell (`Bash`) and call
    /// its patches `apply_patch` (asked as `Edit`); OpenCode's plugin maps its own names.
    pub fn approval_tool_name(self, native: &str) -> &str {
        match self {
            Runtime::Gemini => gemini::GATED_TOOLS
                .iter()
                .find(|(ours, _)| *ours == native)
                .map_or(native, |(_, name)| name),
            Runtime::Codex | Runtime::OpenCode if native == PATCH => "Edit",
            Runtime::ClaudeCode | Runtime::Codex | Runtime::OpenCode => native,
        }
    }

    /// The approvals' name a call of `native` is gated and asked by, when `gated` (the
    /// approvals' tool list) gates it; `None` when it runs unasked.
    pub fn gated_as(self, native: &str, gated: &[String]) -> Option<String> {
        let is_gated = |name: &str| gated.iter().any(|g| g == name);
        match self {
            Runtime::Codex | Runtime::OpenCode if native == PATCH => PATCH_GATES
                .iter()
                .find(|name| is_gated(name))
                .map(|name| (*name).to_owned()),
            _ => {
                let name = self.approval_tool_name(native);
                is_gated(name).then(|| name.to_owned())
            }
        }
    }

    /// This runtime's own names for the approvals' tool names `gated`, as its pre-tool-use
    /// hook is matched on: Gemini's for those it has; the others' are the approvals' own, and
    /// Codex's also `apply_patch` when a name that gates patches is gated (its matchers take
    /// `Edit` and `Write` for it, but not `MultiEdit`).
    pub fn native_tool_names(self, gated: &[String]) -> Vec<String> {
        match self {
            Runtime::Gemini => gemini::GATED_TOOLS
                .iter()
                .filter(|(_, name)| gated.iter().any(|g| g == name))
                .map(|(native, _)| (*native).to_owned())
                .collect(),
            Runtime::Codex => {
                let mut names = gated.to_vec();
                if self.gated_as(PATCH, gated).is_some() && !names.iter().any(|n| n == PATCH) {
                    names.push(PATCH.to_owned());
                }
                names
            }
            Runtime::ClaudeCode | Runtime::OpenCode => gated.to_vec(),
        }
    }

    /// A tool call's input in Claude Code's shape, so approvers see what it does: OpenCode's
    /// `filePath`, `oldString`, `newString`, `replaceAll` become `file_path`, `old_string`,
    /// `new_string`, `replace_all`; a patch (OpenCode's `patchText`, Codex's `apply_patch`
    /// `command`) becomes `patch`. Anything else is kept as it is.
    pub fn approval_tool_input(self, native: &str, input: Value) -> Value {
        match (self, input) {
            (Runtime::Codex, Value::Object(mut fields)) if native == PATCH => {
                let patch = fields.remove("command").unwrap_or(Value::Null);
                json!({ "patch": patch })
            }
            (Runtime::OpenCode, Value::Object(fields)) => {
                let renamed: Map<String, Value> = fields
                    .into_iter()
                    .filter(|(key, _)| !NOT_OPENCODE.contains(&key.as_str()))
                    .map(|(key, value)| {
                        let key = match key.as_str() {
                            "filePath" => "file_path".to_owned(),
                            "oldString" => "old_string".to_owned(),
                            "newString" => "new_string".to_owned(),
                            "replaceAll" => "replace_all".to_owned(),
                            "patchText" => "patch".to_owned(),
                            _ => key,
                        };
                        (key, value)
                    })
                    .collect();
                Value::Object(renamed)
            }
            (_, input) => input,
        }
    }

    /// The pre-tool-use answer in this runtime's shape, from Claude Code's
    /// (`hookSpecificOutput.permissionDecision`, which Codex and our OpenCode plugin read too).
    /// Gemini's BeforeTool takes `{"decision": "allow"|"deny", "reason"}`
    /// (docs/agents/gemini-cli.md).
    pub fn tool_decision(self, claude: Value) -> Value {
        match self {
            Runtime::Gemini => {
                let decided = &claude["hookSpecificOutput"];
                let allow = decided["permissionDecision"] == "allow";
                json!({
                    "decision": if allow { "allow" } else { "deny" },
                    "reason": decided["permissionDecisionReason"].as_str().unwrap_or("denied by Repowire's approvals"),
                })
            }
            Runtime::ClaudeCode | Runtime::Codex | Runtime::OpenCode => claude,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn patches_are_gated_as_edit_or_write() {
        let gated = names(&["Bash", "Edit", "Write"]);
        assert_eq!(
            Runtime::Codex.gated_as("apply_patch", &gated).as_deref(),
            Some("Edit")
        );
        assert_eq!(
            Runtime::Codex
                .gated_as("apply_patch", &names(&["Write"]))
                .as_deref(),
            Some("Write")
        );
        assert_eq!(
            Runtime::Codex.gated_as("apply_patch", &names(&["Bash"])),
            None
        );
        assert_eq!(
            Runtime::Codex.gated_as("Bash", &gated).as_deref(),
            Some("Bash")
        );
        assert_eq!(Runtime::Codex.gated_as("write_stdin", &gated), None);
        assert_eq!(
            Runtime::Codex.native_tool_names(&gated),
            names(&["Bash", "Edit", "Write", "apply_patch"])
        );
        // MultiEdit gates patches too, and Codex's matchers do not take it for apply_patch.
        assert_eq!(
            Runtime::Codex.native_tool_names(&names(&["MultiEdit"])),
            names(&["MultiEdit", "apply_patch"])
        );
        assert_eq!(
            Runtime::Codex.native_tool_names(&names(&["Bash"])),
            names(&["Bash"])
        );
        let patch = "*** Begin Patch\n*** Add File: a.txt\n+hi\n*** End Patch\n";
        assert_eq!(
            Runtime::Codex.approval_tool_input("apply_patch", json!({ "command": patch })),
            json!({ "patch": patch })
        );
        // A shell call's input is its own.
        assert_eq!(
            Runtime::Codex.approval_tool_input("Bash", json!({ "command": "ls" })),
            json!({ "command": "ls" })
        );
    }

    #[test]
    fn opencode_inputs_are_shown_in_claude_codes_shape() {
        assert_eq!(
            Runtime::OpenCode.approval_tool_input(
                "Edit",
                json!({"filePath": "/p/a.rs", "oldString": "x", "newString": "y", "replaceAll": true})
            ),
            json!({"file_path": "/p/a.rs", "old_string": "x", "new_string": "y", "replace_all": true})
        );
        assert_eq!(
            Runtime::OpenCode
                .approval_tool_input("Write", json!({"filePath": "/p/b", "content": "c"})),
            json!({"file_path": "/p/b", "content": "c"})
        );
        assert_eq!(
            Runtime::OpenCode.approval_tool_input("Edit", json!({"patchText": "P"})),
            json!({"patch": "P"})
        );
        assert_eq!(
            Runtime::OpenCode
                .gated_as("Edit", &names(&["Edit"]))
                .as_deref(),
            Some("Edit")
        );
        // Its patches are gated as Codex's are.
        assert_eq!(
            Runtime::OpenCode
                .gated_as("apply_patch", &names(&["Write"]))
                .as_deref(),
            Some("Write")
        );
        // A model's decoy in Claude Code's spelling is dropped: the approver sees what runs.
        assert_eq!(
            Runtime::OpenCode.approval_tool_input(
                "Edit",
                json!({"filePath": "/home/u/.ssh/authorized_keys", "oldString": "", "newString": "key",
                       "file_path": "README.md", "old_string": "teh", "new_string": "the"})
            ),
            json!({"file_path": "/home/u/.ssh/authorized_keys", "old_string": "", "new_string": "key"})
        );
    }

    #[test]
    fn gemini_names_only_the_tools_it_has() {
        assert_eq!(
            Runtime::Gemini.native_tool_names(&names(&["Bash", "Edit", "NotebookEdit"])),
            names(&["run_shell_command", "replace"])
        );
        assert_eq!(Runtime::Gemini.approval_tool_name("replace"), "Edit");
        assert_eq!(
            Runtime::Gemini
                .gated_as("replace", &names(&["Edit"]))
                .as_deref(),
            Some("Edit")
        );
    }
}

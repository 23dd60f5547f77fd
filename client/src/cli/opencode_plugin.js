// Repowire's OpenCode plugin. `repowire setup` writes this file and rewrites it on every run;
// `repowire uninstall` removes it. Edits here are lost: change Repowire's settings instead.
//
// OpenCode has no command hooks, so this plugin runs Repowire's hook command at OpenCode's
// events, like Claude Code runs it from settings.json (docs/client.md, "OpenCode"):
//   - a session's first prompt in this process: `session-start`, then every prompt
//     (`chat.message`): `prompt-submit`. What they answer (who you are, your peers, messages
//     that arrived) is added to the prompt as a part the model reads and the TUI hides;
//   - the end of a turn (`session.idle`): `stop`. Messages that arrived during the turn come
//     back as a new prompt;
//   - with approvals on, before each tool call (`tool.execute.before`): `pre-tool-use`. A
//     denial, or no decision at all, stops the call.
// The hook command never hangs OpenCode: it answers within seconds, and a hook that does not
// answer is killed.
import { spawn } from "node:child_process";

// `hook`: the command before its event; `env`: added to OpenCode's environment for it;
// `approvals`: null when tool calls are not gated, else how long one may wait for a person.
const SETTINGS = /*SETTINGS*/;
const HOOK = SETTINGS.hook;
// OpenCode's tool names → the names Repowire's approvals use (Claude Code's).
const TOOLS = { bash: "Bash", edit: "Edit", write: "Write", apply_patch: "Edit" };

function hook(event, payload, limitMs, extra = []) {
  return new Promise((resolve, reject) => {
    let out = "";
    let child;
    try {
      child = spawn(HOOK[0], [...HOOK.slice(1), event, ...extra], {
        env: { ...process.env, ...SETTINGS.env },
        stdio: ["pipe", "pipe", "ignore"],
      });
    } catch (e) {
      reject(e);
      return;
    }
    const timer = setTimeout(() => child.kill("SIGKILL"), limitMs);
    child.on("error", (e) => {
      clearTimeout(timer);
      reject(e);
    });
    child.stdout.on("data", (d) => (out += d));
    child.on("close", (code) => {
      clearTimeout(timer);
      if (code !== 0) {
        reject(new Error(`repowire hook ${event} exited with ${code}`));
        return;
      }
      try {
        resolve(out.trim() ? JSON.parse(out) : null);
      } catch (e) {
        reject(e);
      }
    });
    child.stdin.on("error", () => {});
    child.stdin.end(JSON.stringify(payload));
  });
}

// A hook that fails leaves OpenCode as it would be without Repowire.
async function quiet(event, payload) {
  try {
    return await hook(event, payload, 20000);
  } catch {
    return null;
  }
}

let seq = 0;
const partId = () => `prt_repowire_${Date.now()}_${seq++}`;

export const Repowire = async ({ client, directory }) => {
  // Sessions this process has started (a resumed one has no `session.created`), subagent
  // sessions (never peers), and sessions whose prompt this plugin sent.
  const started = new Set();
  const children = new Set();
  const continued = new Set();
  const base = (id, name) => ({ session_id: id, cwd: directory, hook_event_name: name });

  return {
    "chat.message": async (input, output) => {
      const id = input.sessionID;
      if (!id || children.has(id)) return;
      const context = [];
      if (!started.has(id)) {
        started.add(id);
        const start = await quiet("session-start", { ...base(id, "session.created"), source: "startup" });
        if (start?.context) context.push(start.context);
      }
      const prompt = (output.parts || []).filter((p) => p.type === "text").map((p) => p.text).join("\n");
      const submit = await quiet("prompt-submit", { ...base(id, "chat.message"), prompt });
      if (submit?.context) context.push(submit.context);
      for (const text of context) {
        output.parts.push({
          id: partId(),
          sessionID: id,
          messageID: output.message?.id,
          type: "text",
          text,
          synthetic: true,
        });
      }
    },

    "tool.execute.before": async (input, output) => {
      const gate = SETTINGS.approvals;
      if (!gate || children.has(input.sessionID)) return;
      const payload = {
        ...base(input.sessionID, "tool.execute.before"),
        tool_name: TOOLS[input.tool] ?? input.tool,
        tool_input: output.args ?? {},
      };
      let answer;
      try {
        // The hook decides within the approval timeout; a little longer, and it is killed.
        answer = await hook("pre-tool-use", payload, (gate.timeout_seconds + 30) * 1000, [
          "--approval-timeout",
          String(gate.timeout_seconds),
        ]);
      } catch (e) {
        throw new Error(`Repowire could not ask for an approval (${e.message}); denied`);
      }
      const decision = answer?.hookSpecificOutput;
      if (decision && decision.permissionDecision !== "allow") {
        throw new Error(decision.permissionDecisionReason || "denied by Repowire's approvals");
      }
    },

    event: async ({ event }) => {
      if (event.type === "session.created" && event.properties?.info?.parentID) {
        children.add(event.properties.info.id);
        return;
      }
      if (event.type !== "session.idle") return;
      const id = event.properties?.sessionID;
      if (!id || !started.has(id) || children.has(id)) return;
      const again = continued.delete(id);
      const stop = await quiet("stop", { ...base(id, "session.idle"), stop_hook_active: again });
      if (!stop?.continue) return;
      continued.add(id);
      client.session
        .promptAsync({
          path: { id },
          body: {
            parts: [
              { type: "text", text: "[repowire] messages arrived during your turn" },
              { type: "text", text: stop.continue, synthetic: true },
            ],
          },
        })
        .catch(() => continued.delete(id));
    },
  };
};

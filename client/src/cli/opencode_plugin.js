// Repowire's OpenCode plugin. `repowire setup` writes this file and rewrites it on every run;
// `repowire uninstall` removes it. Edits here are lost: change Repowire's settings instead.
//
// OpenCode has no command hooks, so this plugin runs Repowire's hook command at OpenCode's
// events, like Claude Code runs it from settings.json (docs/client.md, "OpenCode"):
//   - a session's first prompt (`chat.message`): `session-start` (after a `session-end` of the
//     session this process spoke for before, when it moved to another: /new, /sessions), then
//     every prompt: `prompt-submit`. What they answer (who you are, your peers, messages that
//     arrived) is added to the prompt as a part the model reads and the TUI hides;
//   - the end of a turn (`session.idle`): `stop`, with the text of the turn's last assistant
//     message (relayed in a direct conversation). When messages arrived during the turn, the
//     plugin sends a prompt of its own, and its `prompt-submit` hands them over;
//   - with approvals on, before each tool call (`tool.execute.before`), a subagent's as its
//     session's: `pre-tool-use`. A denial, or no decision at all, stops the call.
// Subagent sessions are never peers. The hook command never hangs OpenCode: it answers within
// seconds, and a hook that does not answer is killed.
import { spawn } from "node:child_process";

// `hook`: the command before its event; `env`: added to OpenCode's environment for it;
// `approvals`: null when tool calls are not gated, else how long one may wait for a person.
const SETTINGS = /*SETTINGS*/;
const HOOK = SETTINGS.hook;
// OpenCode's tool names → the names Repowire's approvals use (Claude Code's). `apply_patch`
// keeps its name: a patch is gated when Edit or Write is.
const TOOLS = { bash: "Bash", edit: "Edit", write: "Write" };
// The prompt this plugin sends when messages arrived during a turn.
const CONTINUE = "[repowire] messages arrived during your turn";

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
    child.stdout.setEncoding("utf8");
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
  // The session this process speaks for, each session's parent (null: a top-level session),
  // the agent and model of each session's last prompt (a prompt of ours runs as they did), the
  // sessions whose last turn this plugin continued, and each session's hook calls in order.
  let current = null;
  const parents = new Map();
  const how = new Map();
  const continued = new Set();
  const chains = new Map();
  const base = (id, name) => ({ session_id: id, cwd: directory, hook_event_name: name });

  // One hook call at a time per session, in order: a turn's `stop` and a prompt typed right
  // after it must not both hand the same messages over.
  function serial(id, work) {
    const next = (chains.get(id) ?? Promise.resolve()).then(work, work);
    chains.set(id, next.catch(() => {}));
    return next;
  }

  // The parent of session `id` (null for a top-level one): from `session.created` when this
  // process created it, else asked (and remembered once answered: a subagent's session
  // resumed by a later process).
  async function parentOf(id) {
    if (parents.has(id)) return parents.get(id);
    try {
      const got = await client.session.get({ path: { id } });
      const parent = (got?.data ?? got)?.parentID ?? null;
      parents.set(id, parent);
      return parent;
    } catch {
      // Not remembered: asked again next time (a subagent taken for a top-level session
      // would move the peer to it).
      return null;
    }
  }

  // The top-level session whose work `id` is (itself, unless it is a subagent's).
  async function rootOf(id) {
    let at = id;
    for (let depth = 0; depth < 16; depth++) {
      const parent = await parentOf(at);
      if (!parent) break;
      at = parent;
    }
    return at;
  }

  // The text parts of session `id`'s last assistant message after its last user message (the
  // turn's final words, as Claude Code's Stop hook reports them; a turn that said nothing new
  // has none); null when there is none or it cannot be read.
  async function lastReply(id) {
    try {
      const got = await client.session.messages({ path: { id } });
      const all = got?.data ?? got;
      if (!Array.isArray(all)) return null;
      const since = all.findLastIndex((m) => m?.info?.role === "user");
      const last = all.slice(since + 1).findLast((m) => m?.info?.role === "assistant");
      const text = (last?.parts ?? [])
        .filter((p) => p.type === "text" && !p.synthetic && typeof p.text === "string")
        .map((p) => p.text)
        .join("\n");
      return text || null;
    } catch {
      return null;
    }
  }

  return {
    "chat.message": async (input, output) => {
      const id = input.sessionID;
      if (!id || (await parentOf(id))) return;
      how.set(id, { agent: input.agent, model: input.model });
      const prompt = (output.parts || []).filter((p) => p.type === "text").map((p) => p.text).join("\n");
      const context = await serial(id, async () => {
        const texts = [];
        if (current !== id) {
          if (current) {
            // The process moved to another session: the peer moves with it, like after
            // Claude Code's /clear, and what waited for it waits for the new session.
            await quiet("session-end", { ...base(current, "session.switched"), reason: "clear" });
          }
          current = id;
          const start = await quiet("session-start", { ...base(id, "session.created"), source: "startup" });
          if (start?.context) texts.push(start.context);
        }
        // Our own prompt, marked so the daemon does not report it to senders as a person's.
        const ours = continued.has(id) && prompt === CONTINUE;
        const submit = await quiet("prompt-submit", {
          ...base(id, "chat.message"),
          prompt,
          repowire_continuation: ours,
        });
        if (submit?.context) texts.push(submit.context);
        return texts;
      });
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
      if (!gate) return;
      // A subagent's tool calls are its session's: gated, and asked, as that session's.
      const root = await rootOf(input.sessionID);
      const payload = {
        ...base(root, "tool.execute.before"),
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
      if (event.type === "session.created" && event.properties?.info?.id) {
        const info = event.properties.info;
        parents.set(info.id, info.parentID ?? null);
        return;
      }
      if (event.type !== "session.idle") return;
      const id = event.properties?.sessionID;
      if (!id || id !== current) return;
      const again = continued.delete(id);
      const stop = await serial(id, async () =>
        quiet("stop", {
          ...base(id, "session.idle"),
          stop_hook_active: again,
          last_assistant_message: await lastReply(id),
        }),
      );
      if (!stop?.continue) return;
      // Messages are waiting: a prompt of ours, whose prompt-submit hands them over (so they
      // count as handed over only once they are in a prompt). If it cannot be sent, they wait
      // for the next prompt or wake.
      continued.add(id);
      const { agent, model } = how.get(id) ?? {};
      client.session
        .promptAsync({
          path: { id },
          body: { agent, model, parts: [{ type: "text", text: CONTINUE }] },
        })
        .catch(() => continued.delete(id));
    },
  };
};

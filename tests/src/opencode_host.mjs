// Loads the OpenCode plugin that `repowire setup` wrote (argv[2]) as OpenCode would (its
// exported function, called with a client and the project directory, argv[3]) and drives its
// hooks from JSON lines on stdin; one JSON line on stdout answers each, with its `id`. The
// client is a stand-in for OpenCode's SDK client: `session.get` answers from the parents the
// test gave (`parents`), in the SDK's `{data}` shape or bare (`shape`), and `promptAsync`
// records the prompt. Requests run concurrently (a gated tool call waits for a person).
//
//   {"id", "op": "message", "session", "prompt", "agent", "model"} → {"id", "parts": [text…]}
//   {"id", "op": "event", "event"}                                 → {"id"}
//   {"id", "op": "tool", "session", "tool", "args"}                → {"id", "ok"} | {"id", "error"}
//   {"id", "op": "parents", "map", "shape"}                        → {"id"}
//   {"id", "op": "calls"}                                          → {"id", "get", "prompts"}
import { createInterface } from "node:readline";

const [plugin, directory] = process.argv.slice(2);
const known = new Map();
let shape = "data";
const gets = [];
const prompts = [];

const client = {
  session: {
    get: async ({ path }) => {
      gets.push(path.id);
      if (!known.has(path.id)) throw new Error(`no session ${path.id}`);
      const info = { id: path.id, parentID: known.get(path.id) ?? undefined };
      return shape === "bare" ? info : { data: info };
    },
    promptAsync: async (request) => {
      prompts.push(request);
      return { data: undefined };
    },
  },
};

const loaded = await import(plugin);
const exports = Object.values(loaded).filter((f) => typeof f === "function");
if (exports.length !== 1) throw new Error(`the plugin exports ${exports.length} functions`);
const hooks = await exports[0]({ client, directory, worktree: directory, project: {} });

const say = (line) => process.stdout.write(`${JSON.stringify(line)}\n`);

async function run(request) {
  switch (request.op) {
    case "message": {
      const output = {
        message: { id: `msg_${request.id}` },
        parts: [{ type: "text", text: request.prompt }],
      };
      await hooks["chat.message"](
        { sessionID: request.session, agent: request.agent, model: request.model },
        output,
      );
      const parts = output.parts.slice(1);
      if (parts.some((p) => p.synthetic !== true || p.sessionID !== request.session)) {
        throw new Error(`a part the TUI would draw: ${JSON.stringify(parts)}`);
      }
      return { parts: parts.map((p) => p.text) };
    }
    case "event":
      await hooks.event({ event: request.event });
      return {};
    case "tool":
      try {
        await hooks["tool.execute.before"](
          { tool: request.tool, sessionID: request.session, callID: `call_${request.id}` },
          { args: request.args },
        );
        return { ok: true };
      } catch (e) {
        return { error: String(e.message) };
      }
    case "parents":
      for (const [id, parent] of Object.entries(request.map)) known.set(id, parent);
      shape = request.shape ?? shape;
      return {};
    case "calls":
      return { get: gets, prompts };
    default:
      throw new Error(`unknown op ${request.op}`);
  }
}

for await (const line of createInterface({ input: process.stdin })) {
  if (!line.trim()) continue;
  const request = JSON.parse(line);
  run(request).then(
    (answer) => say({ id: request.id, ...answer }),
    (e) => say({ id: request.id, failed: String(e.stack ?? e) }),
  );
}

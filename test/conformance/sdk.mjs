// @anthropic-ai/sdk against gate-operator's fake Sessions API (internal/anthropic/anthropictest).
// Prints one JSON line per case: {"case": ..., "ok": bool, "detail": ...}. The Go driver also
// checks what the fake recorded of these requests.
import Anthropic from "@anthropic-ai/sdk";

const { BASE_URL, API_KEY, SESSION, AGENT } = process.env;
const client = new Anthropic({ apiKey: API_KEY, baseURL: BASE_URL, maxRetries: 0 });
const report = (name, ok, detail) => console.log(JSON.stringify({ case: name, ok, detail }));

async function run(name, f) {
  try {
    const detail = await f();
    report(name, true, detail);
  } catch (e) {
    report(name, false, String(e && e.stack ? e.stack : e));
  }
}

await run("events.list auto-pagination", async () => {
  const ids = [];
  for await (const ev of client.beta.sessions.events.list(SESSION, { limit: 2 })) ids.push(ev.id);
  if (ids.length < 6) throw new Error(`only ${ids.length} events`);
  return { events: ids.length };
});

await run("events.list types filter", async () => {
  const types = new Set();
  for await (const ev of client.beta.sessions.events.list(SESSION, { types: ["agent.tool_use"] })) types.add(ev.type);
  if (types.size !== 1 || !types.has("agent.tool_use")) throw new Error(`types ${[...types]}`);
  return { types: [...types] };
});

let pending = [];
for await (const ev of client.beta.sessions.events.list(SESSION, { types: ["agent.tool_use"] })) {
  if (ev.evaluated_permission === "ask") pending.push(ev.id);
}

await run("events.stream to session.status_idle through pings", async () => {
  const stream = await client.beta.sessions.events.stream(SESSION);
  // Answer one call now that the stream is open: the session emits a confirmation and a new
  // requires_action idle listing the calls that remain.
  await client.beta.sessions.events.send(SESSION, {
    events: [{ type: "user.tool_confirmation", tool_use_id: pending[0], result: "allow" }],
  });
  const seen = [];
  for await (const ev of stream) {
    seen.push(ev.type);
    if (ev.type === "session.status_idle") {
      if (ev.stop_reason.type !== "requires_action" || !ev.stop_reason.event_ids.includes(pending[1])) {
        throw new Error(`idle ${JSON.stringify(ev.stop_reason)}`);
      }
      break;
    }
  }
  return { seen };
});

await run("events.send user.tool_confirmation deny", async () => {
  const res = await client.beta.sessions.events.send(SESSION, {
    events: [{ type: "user.tool_confirmation", tool_use_id: pending[1], result: "deny", deny_message: "[Intutic Governance] BLOCKED: no" }],
  });
  const echoed = res.data?.[0];
  if (!echoed || echoed.type !== "user.tool_confirmation" || echoed.result !== "deny") throw new Error(JSON.stringify(res));
  return { echoed: echoed.tool_use_id };
});

await run("events.send rejected for an answered id", async () => {
  try {
    await client.beta.sessions.events.send(SESSION, {
      events: [{ type: "user.tool_confirmation", tool_use_id: pending[1], result: "allow" }],
    });
  } catch (e) {
    if (e instanceof Anthropic.BadRequestError && e.error?.error?.type === "invalid_request_error") return { status: e.status };
    throw e;
  }
  throw new Error("the fake accepted a second confirmation");
});

await run("sessions.list by agent", async () => {
  const ids = [];
  for await (const s of client.beta.sessions.list({ agent_id: AGENT })) ids.push(s.id);
  if (!ids.includes(SESSION)) throw new Error(`sessions ${ids}`);
  return { sessions: ids.length };
});

await run("agents.retrieve reads the agent and its tools' policies", async () => {
  const agent = await client.beta.agents.retrieve(AGENT);
  const toolsets = agent.tools.filter((t) => t.type !== "custom");
  const policies = toolsets.map((t) => ({
    type: t.type,
    mcp_server_name: t.mcp_server_name,
    default: [t.default_config.enabled, t.default_config.permission_policy.type],
    configs: t.configs.map((c) => [c.name, c.enabled, c.permission_policy.type]),
  }));
  if (agent.id !== AGENT || agent.type !== "agent" || typeof agent.version !== "number") throw new Error(JSON.stringify(agent));
  return { id: agent.id, version: agent.version, name: agent.name, policies };
});

await run("agents.retrieve of an unknown agent is NotFoundError", async () => {
  try {
    await client.beta.agents.retrieve("agent_unknown");
  } catch (e) {
    if (e instanceof Anthropic.NotFoundError && e.error?.error?.type === "not_found_error") return { status: e.status };
    throw e;
  }
  throw new Error("the fake answered an unknown agent");
});

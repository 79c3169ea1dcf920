// A minimal MCP server on stdio (JSON-RPC 2.0, newline-delimited) with one tool, `release`:
// enough for Claude Code to list and call an MCP tool offline. A call that runs writes the
// marker file named by $MARKER, so the driver can tell whether the gate let it through.
import { writeFileSync } from "node:fs";
import { createInterface } from "node:readline";

const send = (msg) => process.stdout.write(JSON.stringify(msg) + "\n");
const rl = createInterface({ input: process.stdin });
rl.on("line", (line) => {
  let req;
  try {
    req = JSON.parse(line);
  } catch {
    return;
  }
  if (req.id === undefined) return; // notifications need no answer
  switch (req.method) {
    case "initialize":
      send({ jsonrpc: "2.0", id: req.id, result: { protocolVersion: req.params?.protocolVersion ?? "2025-06-18", capabilities: { tools: {} }, serverInfo: { name: "deploy", version: "1.0.0" } } });
      break;
    case "tools/list":
      send({ jsonrpc: "2.0", id: req.id, result: { tools: [{ name: "release", description: "Release a service", inputSchema: { type: "object", properties: { service: { type: "string" }, environment: { type: "string" } }, required: ["service", "environment"] } }] } });
      break;
    case "tools/call":
      writeFileSync(process.env.MARKER, JSON.stringify(req.params));
      send({ jsonrpc: "2.0", id: req.id, result: { content: [{ type: "text", text: "released" }] } });
      break;
    default:
      send({ jsonrpc: "2.0", id: req.id, error: { code: -32601, message: "method not found" } });
  }
});

// @ai-sdk/harness takes the continuations gate-operator's POST /v1/harness/approvals returns.
// Reads {"calls": [{kind, approvalId, toolCallId, toolName, input}], "continuations": [...]} on
// stdin; prints one JSON line per case.
import { collectHarnessAgentToolApprovalContinuations } from "@ai-sdk/harness/agent";

const input = JSON.parse(await new Promise((res) => {
  let s = "";
  process.stdin.on("data", (c) => (s += c));
  process.stdin.on("end", () => res(s));
}));
const report = (name, ok, detail) => console.log(JSON.stringify({ case: name, ok, detail }));

for (const call of input.calls) {
  const cont = input.continuations.find((c) => c.approvalId === call.approvalId);
  const name = `continuation for a ${call.kind} is accepted by collectHarnessAgentToolApprovalContinuations`;
  if (!cont) {
    report(name, false, "no continuation returned");
    continue;
  }
  // The conversation as the AI SDK keeps it: the assistant's tool call and approval request,
  // then a tool message with the approval response.
  const messages = [
    { role: "user", content: "do the task" },
    {
      role: "assistant",
      content: [
        { type: "tool-call", toolCallId: call.toolCallId, toolName: call.toolName, input: call.input },
        { type: "tool-approval-request", approvalId: call.approvalId, toolCallId: call.toolCallId },
      ],
    },
    { role: "tool", content: [cont] },
  ];
  try {
    const got = collectHarnessAgentToolApprovalContinuations({ messages });
    const mine = got.find((r) => r.approvalId === call.approvalId);
    const ok = !!mine && mine.type === "tool-approval-response" && mine.approved === call.approved && (call.approved || (mine.reason ?? "").startsWith("[Intutic Governance] BLOCKED: "));
    report(name, ok, { returned: got.length, approved: mine?.approved, reason: mine?.reason });
  } catch (e) {
    report(name, false, String(e));
  }
}

// standardwebhooks signs deliveries for gate-operator's webhook receiver. Prints a JSON array
// of {case, headers, body, expect} for the Go driver to POST.
import { Webhook } from "standardwebhooks";

const { SECRET, OTHER_SECRET } = process.env;
const wh = new Webhook(SECRET);
const other = new Webhook(OTHER_SECRET);
const now = new Date();
// Each delivery names its own session (sesn_<msg id>), so the driver can tell which ones
// were acted on.
const body = (id, msg) =>
  JSON.stringify({ id, created_at: now.toISOString(), type: "event", data: { id: `sesn_${msg}`, organization_id: "org_1", workspace_id: "wrkspc_1", type: "session.requires_action" } });
const headers = (id, ts, sig) => ({ "webhook-id": id, "webhook-timestamp": String(Math.floor(ts.getTime() / 1000)), "webhook-signature": sig });
const shift = (s) => new Date(now.getTime() + s * 1000);

const out = [];
const add = (name, id, ts, sig, payload, expect) => out.push({ case: name, headers: headers(id, ts, sig), body: payload, expect });

let b = body("wevt_valid", "msg_valid");
add("valid", "msg_valid", now, wh.sign("msg_valid", now, b), b, 202);
b = body("wevt_multi", "msg_multi");
add("several signatures", "msg_multi", now, `${other.sign("msg_multi", now, b)} ${wh.sign("msg_multi", now, b)}`, b, 202);
b = body("wevt_wrongkey", "msg_wrongkey");
add("wrong key", "msg_wrongkey", now, other.sign("msg_wrongkey", now, b), b, 401);
b = body("wevt_tampered", "msg_tampered");
add("tampered body", "msg_tampered", now, wh.sign("msg_tampered", now, b), b.replace("org_1", "org_2"), 401);
b = body("wevt_old", "msg_old");
add("too old", "msg_old", shift(-330), wh.sign("msg_old", shift(-330), b), b, 401);
b = body("wevt_new", "msg_new");
add("too new", "msg_new", shift(330), wh.sign("msg_new", shift(330), b), b, 401);
b = body("wevt_valid", "msg_valid");
add("replayed", "msg_valid", now, wh.sign("msg_valid", now, b), b, 200);

// The library's own verifier accepts exactly the deliveries gate-operator should accept.
for (const d of out) {
  let ok = true;
  try {
    wh.verify(d.body, d.headers);
  } catch {
    ok = false;
  }
  d.libraryAccepts = ok;
}
console.log(JSON.stringify(out));

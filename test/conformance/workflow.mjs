// @workflow/errors judges the bodies gate-operator's /v1/workflow/needs-approval returns.
// Reads {"fatal": <403 body>, "retryable": <503 body>} on stdin; prints one JSON line per case.
import { FatalError, RetryableError } from "@workflow/errors";

const input = JSON.parse(await new Promise((res) => {
  let s = "";
  process.stdin.on("data", (c) => (s += c));
  process.stdin.on("end", () => res(s));
}));
const report = (name, ok, detail) => console.log(JSON.stringify({ case: name, ok, detail }));
const fromBody = (b) => Object.assign(new Error(b.message), { name: b.name, ...b });

const fatal = fromBody(input.fatal);
report("FatalError.is(403 body)", FatalError.is(fatal) === true, { name: fatal.name });
report("403 body is not retryable", RetryableError.is(fatal) === false, {});
const retry = fromBody(input.retryable);
report("RetryableError.is(503 body)", RetryableError.is(retry) === true, { name: retry.name });
report("503 body is not fatal", FatalError.is(retry) === false, {});

// Checks that two servings of the Duet API (the Rust worker and the
// JavaScript reference of bench/reference/) answer alike: the same statuses,
// headers that matter, error texts and JSON shapes, the same replies and
// histories, for /health, errors and limits, /message (including `<run>`
// rounds, the model's whole context and a long command quoted cut),
// /messages, /sandbox/exec (including what another site's page could send)
// and DELETE. Each worker gets the same sequence of requests in turn (they may
// share one sandboxd: the sequence ends by deleting its room).
//
// Values that differ by nature are reduced to their shape: timestamps to
// "ts" (checked to be integer milliseconds), sandboxd's duration and
// timestamp to their type, some error texts to their prefix (errorText).
import { client } from "../../tests/e2e/support/stack.mjs";

const isTs = (v) => Number.isSafeInteger(v) && v > 1.7e12;

/**
 * An error text as compared: JSON parse errors (serde_json's against V8's)
 * by their prefix, and the 404's list of endpoints too (the Rust worker
 * also names its web page and live feed, which the reference lacks).
 */
export function errorText(text) {
  for (const prefix of ["request body is not valid JSON: ", "no such endpoint; supported: "]) {
    if (text.startsWith(prefix)) return `${prefix}…`;
  }
  return text;
}

/** The parts of an answer that must be equal. */
function shape(value, key) {
  if (Array.isArray(value)) return value.map((v) => shape(v));
  if (value && typeof value === "object") {
    return Object.fromEntries(Object.keys(value).map((k) => [k, shape(value[k], k)]));
  }
  if (key === "ts") return isTs(value) ? "ts" : `not a ts: ${JSON.stringify(value)}`;
  if (key === "duration") return typeof value;
  if (key === "timestamp") return typeof value;
  if (key === "error" && typeof value === "string") return errorText(value);
  return value;
}

/** Runs the sequence against `base`; answers one record per request. */
async function sequence(base, { room, token }) {
  const auth = token ? { authorization: `Bearer ${token}` } : {};
  const records = [];
  const api = client(base, auth);
  async function call(label, method, route, body, headers = {}) {
    const res = await api(method, route, body, headers);
    const { text, json } = res;
    records.push({
      label,
      status: res.status,
      allow: res.headers.get("allow"),
      contentType: (res.headers.get("content-type") ?? "").split(";")[0].trim().toLowerCase(),
      body: json === undefined ? text : shape(json),
    });
    return json;
  }
  const r = `/api/rooms/${room}`;
  await call("GET /health", "GET", "/health");
  await call("HEAD /health", "HEAD", "/health");
  await call("unknown path", "GET", "/nope");
  await call("POST /health", "POST", "/health");
  await call("GET /message", "GET", `${r}/message`);
  await call("PUT /messages", "PUT", `${r}/messages`);
  await call("bad room id", "GET", "/api/rooms/a%2Fb/messages");
  await call("long room id", "GET", `/api/rooms/${"x".repeat(129)}/messages`);
  await call("empty history", "GET", `${r}/messages`);
  await call("message: not JSON", "POST", `${r}/message`, "not json");
  await call("message: not an object", "POST", `${r}/message`, "[1]");
  await call("message: no text", "POST", `${r}/message`, {});
  await call("message: wrong types", "POST", `${r}/message`, { text: 5, userId: 7 });
  await call("message: blank", "POST", `${r}/message`, { text: " \u001b[2J " });
  // A body refused unread ends its connection: the client must not reuse it.
  await call("message: too large", "POST", `${r}/message`, { text: "x".repeat(70 * 1024) }, { connection: "close" });
  await call("message: hello", "POST", `${r}/message`, { text: "hello", userId: "ana" });
  await call("message: controls removed", "POST", `${r}/message`, { text: "  \u001b[31mcolored\u001b[0m  ", userId: "\u001b]0;t\u0007bo" });
  await call("message: one command, then the model sees its output", "POST", `${r}/message`, { text: "steps echo hi" });
  await call("message: two commands in one answer", "POST", `${r}/message`, { text: "raw Look: <run>echo one</run> and <run>printf 'two\\nlines'</run>" });
  await call("message: the model's whole context", "POST", `${r}/message`, { text: "context" });
  await call("message: a long command, quoted cut", "POST", `${r}/message`, { text: `raw <run>echo ${"x".repeat(300)}</run>` });
  for (let i = 0; i < 6; i++) await call(`message: filler ${i}`, "POST", `${r}/messages`, { text: `filler ${i}` });
  await call("history: the last 20", "GET", `${r}/messages`);
  await call("exec: echo", "POST", `${r}/sandbox/exec`, { cmd: "echo hi" });
  await call("exec: failing command", "POST", `${r}/sandbox/exec`, { cmd: "false", timeoutMs: 5000 });
  await call("exec: no cmd", "POST", `${r}/sandbox/exec`, {});
  await call("exec: bad timeout", "POST", `${r}/sandbox/exec`, { cmd: "true", timeoutMs: 0 });
  await call("exec: not JSON", "POST", `${r}/sandbox/exec`, "{");
  await call("exec: sent as text/plain", "POST", `${r}/sandbox/exec`, JSON.stringify({ cmd: "id" }), { "content-type": "text/plain" });
  await call("exec: from another site", "POST", `${r}/sandbox/exec`, { cmd: "id" }, { origin: "https://elsewhere.example" });
  await call("DELETE", "DELETE", r);
  await call("history after DELETE", "GET", `${r}/messages`);
  await call("DELETE /messages", "DELETE", `${r}/messages`);
  if (token) {
    await call("no token", "GET", `${r}/messages`, undefined, { authorization: "" });
    await call("wrong token", "GET", `${r}/messages`, undefined, { authorization: "Bearer nope" });
    await call("health needs no token", "GET", "/health", undefined, { authorization: "" });
  }
  return records;
}

/**
 * Sends the same requests to each of `workers` ({name: url}) in turn and
 * compares every answer with the first worker's. Answers {requests,
 * differences}; each difference names the request and what differs.
 */
export async function compareAnswers(workers, { room = `smoke-${Date.now()}`, token } = {}) {
  const names = Object.keys(workers);
  const runs = {};
  for (const name of names) runs[name] = await sequence(workers[name], { room, token });
  const [first, ...others] = names;
  const differences = [];
  for (const other of others) {
    runs[first].forEach((a, i) => {
      const b = runs[other][i];
      const ja = JSON.stringify(a);
      const jb = JSON.stringify(b);
      if (ja !== jb) differences.push({ request: a.label, [first]: a, [other]: b });
    });
  }
  // The answers must also be right, not only alike.
  const expect = (label, ok) => ok || differences.push({ request: label, problem: "unexpected answer" });
  const rec = Object.fromEntries(runs[first].map((x) => [x.label, x]));
  expect("GET /health", rec["GET /health"].status === 200 && rec["GET /health"].body === "ok");
  expect("message: hello", rec["message: hello"].status === 200 && rec["message: hello"].body.reply === "echo: hello");
  expect("message: one command, then the model sees its output", rec["message: one command, then the model sees its output"].body.reply === "Let me check.\n\nOutput (echo hi):\nhi\n\nsaw: hi");
  expect("history: the last 20", rec["history: the last 20"].body.messages?.length === 20);
  expect("exec: echo", rec["exec: echo"].status === 200 && rec["exec: echo"].body.result?.stdout === "hi\n");
  expect("DELETE", rec.DELETE.status === 200 && rec.DELETE.body.cleaned === true);
  return { requests: runs[first].length, differences };
}

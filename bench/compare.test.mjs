// The JavaScript reference (bench/reference/) answers as the Rust worker
// does, so that bench/compare.mjs compares like with like. Both are served
// on workerd by stack.mjs with wrangler.toml's bindings, each with its own
// scripted AI stand-in, sharing one sandboxd, with bearer-token auth on.
// Every answer streams; the default model is offered the run_command tool.
// Both must also write the same rows to each room's log (`feed_log`) and
// audit, read from their Sandbox objects' SQLite files as they go (neither
// serves the log over HTTP: the Rust worker replays it only on the live
// feed's WebSocket, which the reference leaves out).
//
//   node --test bench/compare.test.mjs
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { DatabaseSync } from "node:sqlite";
import { after, before, test } from "node:test";

import { client, ROOT, startSandboxd, startWorker, tempDir } from "../tests/e2e/support/stack.mjs";
import { compareAnswers, errorText } from "./lib/compare-smoke.mjs";

const TOKEN = "t0ken-for-the-smoke";
// A log bound low enough for the test to pass it; its byte bound (1 MiB) is the worker's own.
const FEED_LOG_EVENTS = 100;
let sandboxd, rust, js;

/** `text` without process ids: bash names a command killed at its time limit by its own. */
const withoutPids = (text) => text.replace(/\d+ Killed/g, "<pid> Killed");

before(async () => {
  sandboxd = await startSandboxd({ root: tempDir("compare-smoke") });
  const vars = { SANDBOX_URL: sandboxd.url, DUET_API_TOKEN: TOKEN, FEED_LOG_EVENTS: String(FEED_LOG_EVENTS) };
  rust = await startWorker({ vars });
  js = await startWorker({ vars, buildDir: path.join(ROOT, "bench/reference") });
});

after(async () => {
  for (const w of [rust, js]) {
    await w?.stop();
    if (w) fs.rmSync(w.persistDir, { recursive: true, force: true });
  }
  await sandboxd?.stop();
  if (sandboxd) fs.rmSync(sandboxd.root, { recursive: true, force: true });
});

test("both workers give the same answers", async () => {
  const { requests, differences } = await compareAnswers({ rust: rust.url, js: js.url }, { token: TOKEN });
  assert.deepEqual(differences, [], JSON.stringify(differences, null, 1));
  assert.ok(requests > 30);
});

test("both workers call the tool, stream and cut answers alike", async () => {
  // Tool calls (one, two at once, malformed ones, one with its own time
  // limit), <run> tags beside the tool, a long streamed answer, one cut off
  // mid-way and a model that throws; the inputs these send are compared below.
  const texts = ["tool echo hi-there", "tools echo one ;; echo two", "badtool", "tool-timeout 1000 sleep 5", "tagged echo by-tag", "long 300", "cut half an answer", "fail"];
  const room = `/api/rooms/tools-${Date.now()}`;
  const answers = {};
  for (const [name, w] of Object.entries({ rust, js })) {
    const api = client(w.url, { authorization: `Bearer ${TOKEN}` });
    answers[name] = [];
    for (const text of texts) {
      const res = await api("POST", `${room}/message`, { text });
      answers[name].push([text, res.status, withoutPids(res.json?.reply ?? res.text)]);
    }
    await api("DELETE", room);
  }
  assert.deepEqual(answers.js, answers.rust);
  const reply = (text) => answers.rust.find(([t]) => t === text)[2];
  assert.equal(reply("tool echo hi-there"), "Let me check.\n\nOutput (echo hi-there):\nhi-there\n\nsaw: hi-there");
  assert.match(reply("badtool"), /^recovered: \["error: the arguments of run_command are not a JSON object",/);
  assert.match(reply("cut half an answer"), /^half an answer\n\n\[The model's answer was cut off \(its stream/);
  assert.deepEqual(answers.rust.at(-1).slice(0, 2), ["fail", 503]);
});

test("both workers ask the model the same thing", () => {
  assert.ok(rust.ai.requests.length > 10);
  const asked = (w) => JSON.parse(withoutPids(JSON.stringify(w.ai.requests)));
  assert.deepEqual(asked(js), asked(rust));
  assert.deepEqual(Object.keys(rust.ai.requests[0].inputs).sort(), ["chat_template_kwargs", "max_completion_tokens", "messages", "stream", "tools"]);
  assert.ok(rust.ai.requests.some((r) => r.inputs.messages.some((m) => m.role === "tool")), "tool turns were compared");
  assert.equal(rust.ai.requests[0].model, "@cf/zai-org/glm-4.7-flash");
});

test("both workers log one line per request, of the same shape", () => {
  const lines = (w) => w.logs.map((l) => { try { return JSON.parse(l); } catch { return null; } }).filter((l) => l && "route" in l);
  const shape = (l) => ({ ...l, durationMs: typeof l.durationMs, error: l.error === undefined ? undefined : errorText(l.error) });
  assert.deepEqual(lines(js).map(shape), lines(rust).map(shape));
});

/**
 * Every Sandbox object's log and audit as a worker stored them, by file (a
 * room's object has the same file name under both: ids come from names):
 * the last number given, and the rows kept. Command ids are numbered in
 * order of appearance, times and process ids reduced to their place.
 */
function logs(w) {
  const dir = path.join(w.persistDir, "do", "duet-Sandbox");
  const ids = new Map();
  const plain = (text) =>
    withoutPids(text)
      .replace(/"id":"(c[0-9a-f]{16})"/g, (_, id) => `"id":"#${ids.get(id) ?? ids.set(id, ids.size).get(id)}"`)
      .replace(/"(ts|at|durationMs)":\d+/g, '"$1":0');
  const found = {};
  for (const file of fs.readdirSync(dir).filter((f) => f.endsWith(".sqlite") && f !== "metadata.sqlite").sort()) {
    const db = new DatabaseSync(path.join(dir, file), { readOnly: true });
    try {
      found[file] = {
        last: db.prepare("SELECT seq FROM sqlite_sequence WHERE name = 'feed_log'").get()?.seq ?? 0,
        log: db.prepare("SELECT seq, kind, event FROM feed_log ORDER BY seq").all().map((r) => [r.seq, r.kind, plain(r.event)]),
        audit: db.prepare("SELECT id, entry FROM audit ORDER BY id").all().map((r) => [r.id, plain(r.entry)]),
      };
    } finally {
      db.close();
    }
  }
  return found;
}

test("both workers write the same rows to the room's log and audit", async () => {
  const room = `/api/rooms/log-${Date.now()}`;
  const steps = [
    ["POST", `${room}/message`, { text: "hello", userId: "ana" }],
    ["POST", `${room}/message`, { text: "steps echo hi", userId: "ana" }],
    ["POST", `${room}/message`, { text: "tools echo one ;; echo two" }],
    ["POST", `${room}/message`, { text: "fail", userId: "bo" }],
    // Output in pieces of at most 16 KiB, cut between characters (3 bytes each here).
    ["POST", `${room}/sandbox/exec`, { cmd: "printf '€%.0s' $(seq 1 7000); echo err >&2; exit 3", userId: "bo" }],
    ["POST", `${room}/sandbox/exec`, { cmd: "sleep 5", timeoutMs: 500 }],
    ["POST", `${room}/sandbox/exec`, { cmd: "exit 0", timeoutMs: 0 }],
    // Past the log's byte bound: the oldest events go.
    ["POST", `${room}/sandbox/exec`, { cmd: "head -c 700000 /dev/zero | tr '\\0' x" }],
    ["POST", `${room}/sandbox/exec`, { cmd: "head -c 700000 /dev/zero | tr '\\0' y" }],
    // Past its bound in events.
    ...Array.from({ length: 40 }, (_, i) => ["POST", `${room}/sandbox/exec`, { cmd: `echo ${i}` }]),
    ["POST", `${room}/message`, { text: "tool echo after" }],
    // A cleanup forgets the log; its numbers go on.
    ["DELETE", room],
    ["POST", `${room}/sandbox/exec`, { cmd: "echo again" }],
  ];
  const seen = {};
  for (const [name, w] of Object.entries({ rust, js })) {
    const api = client(w.url, { authorization: `Bearer ${TOKEN}` });
    seen[name] = [];
    for (const [method, route, body] of steps) {
      const res = await api(method, route, body);
      seen[name].push({ step: `${method} ${route} ${JSON.stringify(body)}`, status: res.status, stored: logs(w) });
    }
  }
  for (const [i, step] of seen.rust.entries()) assert.deepEqual(seen.js[i], step, `after ${step.step}`);
  // The log was written, trimmed by bytes and by events, and forgotten.
  const stored = (step, found) => Object.values(seen.rust.at(step).stored).find(found);
  const first = stored(0, (s) => s.log.some(([, , event]) => event.includes('"text":"hello"')));
  assert.deepEqual(first.log.map(([seq, kind]) => [seq, kind]), [[1, "message"], [2, "message"]]);
  const big = seen.rust.findIndex((s) => s.step.includes("' y"));
  const trimmed = stored(big, (s) => s.last > FEED_LOG_EVENTS / 2);
  assert.ok(trimmed.log[0][0] > 1 && trimmed.log.length < FEED_LOG_EVENTS, "trimmed by bytes");
  const full = stored(-3, (s) => s.log.length === FEED_LOG_EVENTS);
  assert.ok(full, "trimmed to FEED_LOG_EVENTS events");
  const again = stored(-1, (s) => s.audit.some(([, entry]) => entry.includes("echo again")));
  assert.deepEqual(again.log.map(([seq, kind]) => [seq - full.last, kind]), [[1, "command"], [2, "output"], [3, "command_end"]]);
  assert.equal(again.audit.length, 1, "the cleanup forgot the audit");
});

// Drives many rooms at once against the local stack (the built worker on
// workerd, a real sandboxd, the scripted model) and checks that nothing is
// lost: no 5xx, every exec's output right, every room's history exactly the
// last 20 messages sent. Prints the figures as a Markdown table.
//
//   npm run load                      # 50 rooms x 20 messages + 20 execs
//   npm run load -- --rooms 10 --per-room 5
import { parseArgs } from "node:util";

import { stats } from "../../bench/lib/load.mjs";
import { LIMITS } from "../e2e/support/limits.mjs";
import { startSandboxd, startWorker } from "../e2e/support/stack.mjs";

const { values: opts } = parseArgs({
  options: {
    rooms: { type: "string", default: "50" },
    "per-room": { type: "string", default: "20" },
  },
});
const ROOMS = Number(opts.rooms);
const PER_ROOM = Number(opts["per-room"]);

const timings = { message: [], exec: [], history: [] };
const failures = [];

async function call(url, kind, method, body) {
  const started = performance.now();
  const headers = body ? { "content-type": "application/json" } : {};
  const res = await fetch(url, { method, headers, body: body && JSON.stringify(body), signal: AbortSignal.timeout(30_000) });
  const json = await res.json();
  timings[kind].push(performance.now() - started);
  if (res.status !== 200) failures.push(`${kind} ${url}: ${res.status} ${json.error}`);
  return json;
}

async function room(base, index) {
  const id = `load-${Date.now()}-${index}`;
  const sent = [];
  for (let i = 0; i < PER_ROOM; i++) {
    const text = `room ${index} message ${i}`;
    const [chat, exec] = await Promise.all([
      call(`${base}/api/rooms/${id}/message`, "message", "POST", { text, userId: `user-${index}` }),
      call(`${base}/api/rooms/${id}/sandbox/exec`, "exec", "POST", { cmd: `echo ${i} >> log.txt && echo "${id}:${i}"` }),
    ]);
    sent.push(text, `echo: ${text}`);
    if (chat.reply !== `echo: ${text}`) failures.push(`${id}: reply ${JSON.stringify(chat.reply)}`);
    if (exec.result?.stdout !== `${id}:${i}\n`) failures.push(`${id}: exec ${i} printed ${JSON.stringify(exec.result?.stdout)}`);
  }
  const history = await call(`${base}/api/rooms/${id}/messages`, "history", "GET");
  const expected = sent.slice(-LIMITS.historyLimit);
  const got = (history.messages ?? []).map((m) => m.text);
  if (JSON.stringify(got) !== JSON.stringify(expected)) failures.push(`${id}: history differs from what was sent`);
  const lines = await call(`${base}/api/rooms/${id}/sandbox/exec`, "exec", "POST", { cmd: "wc -l < log.txt" });
  if (lines.result?.stdout.trim() !== String(PER_ROOM)) failures.push(`${id}: ${lines.result?.stdout.trim()} exec lines, not ${PER_ROOM}`);
}

const sandboxd = await startSandboxd();
const worker = await startWorker({ vars: { SANDBOX_URL: sandboxd.url } });
const started = performance.now();
try {
  await Promise.all(Array.from({ length: ROOMS }, (_, i) => room(worker.url, i).catch((e) => failures.push(`room ${i}: ${e.message}`))));
} finally {
  await worker.stop();
  await sandboxd.stop();
}
const seconds = (performance.now() - started) / 1000;
const total = Object.values(timings).reduce((n, list) => n + list.length, 0);

console.log(`| kind | requests | p50 ms | p99 ms | max ms |`);
console.log(`|---|---|---|---|---|`);
for (const [kind, list] of Object.entries(timings)) {
  const s = stats(list);
  const f = (x) => (x ?? 0).toFixed(1);
  console.log(`| ${kind} | ${s.n} | ${f(s.p50)} | ${f(s.p99)} | ${f(s.max)} |`);
}
console.log(`\n${ROOMS} rooms at once, ${PER_ROOM} messages and ${PER_ROOM} execs each (2 requests in flight per room): ` +
  `${total} requests in ${seconds.toFixed(1)} s (${(total / seconds).toFixed(0)} req/s), ${failures.length} failures.`);
for (const failure of failures.slice(0, 20)) console.log(`FAILED ${failure}`);
process.exit(failures.length === 0 ? 0 : 1);

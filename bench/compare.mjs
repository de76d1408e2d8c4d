// The Rust worker against the JavaScript reference (bench/reference/), side
// by side on this machine: each served on workerd by stack.mjs in a process
// of its own (bench/lib/serve-worker.mjs), each with the scripted AI
// stand-in, both calling one shared sandboxd; the load comes from wrk, a
// separate process (bench/lib/wrk-rooms.lua).
//
// First both workers get the same requests and must give the same answers
// (bench/lib/compare-smoke.mjs). Then, for GET /health, POST /message
// (spread over 50 rooms, each filled to its 20-message window first) and
// POST /sandbox/exec `true` (the same 50 rooms, so the same 50 shells for
// both), each worker is warmed up, then measured in alternating rounds:
// Rust, JS, Rust, JS, ...
//
//   node bench/compare.mjs                       # writes bench/results/compare.json
//   node bench/compare.mjs --merge FILE.json     # sets FILE's sections.compare
//   BENCH_QUICK=1 node bench/compare.mjs         # 2 rounds of 3 s instead of 5 of 10
//
// With --access it measures what room tokens cost instead: one Rust worker
// in token mode, the same rooms and requests, each room's requests carrying
// a writer's room token of that room (checked in the front door, its
// generation in the object) or the service token, in alternating rounds;
// its section is sections.access (default endpoints "history,message,exec").
//
// COMPARE_ROUNDS, COMPARE_SECONDS, COMPARE_CONNECTIONS and COMPARE_ENDPOINTS
// (of health, history, message, exec; default "health,message,exec")
// override the defaults. Needs wrk on PATH.
import { execFileSync, spawn } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { parseArgs } from "node:util";

import { ROOT, startSandboxd, tempDir } from "../tests/e2e/support/stack.mjs";
import { compareAnswers } from "./lib/compare-smoke.mjs";
import { load, postJson, round } from "./lib/load.mjs";
import { progress, writeSection } from "./lib/results.mjs";
import { serveWorker } from "./lib/worker-process.mjs";

const { values: args } = parseArgs({ options: { merge: { type: "string" }, out: { type: "string" }, access: { type: "boolean" } } });
const ACCESS = Boolean(args.access);
const SERVICE_TOKEN = "bench-service-t0ken";
const QUICK = process.env.BENCH_QUICK === "1";
const int = (name, fallback) => (process.env[name] ? Number(process.env[name]) : fallback);
const ROUNDS = int("COMPARE_ROUNDS", QUICK ? 2 : 5);
const SECONDS = int("COMPARE_SECONDS", QUICK ? 3 : 10);
const WARM_SECONDS = 2;
const CONNECTIONS = int("COMPARE_CONNECTIONS", 8);
const THREADS = 2;
const ROOMS = 50;
const ENDPOINTS = [
  { key: "health", label: "GET /health" },
  // Not measured by default: the object hop without a write (COMPARE_ENDPOINTS).
  { key: "history", label: "GET /messages", optional: true },
  { key: "message", label: "POST /message" },
  { key: "exec", label: "POST /sandbox/exec `true`" },
].filter((e) => {
  if (process.env.COMPARE_ENDPOINTS) return process.env.COMPARE_ENDPOINTS.split(",").includes(e.key);
  return ACCESS ? e.key !== "health" : !e.optional;
});
// The two sides measured, each against the other: the first / the second.
const WORKERS = ACCESS
  ? [
      { key: "room", label: "room token (a writer's, of each room)", auth: "room" },
      { key: "service", label: "service token (DUET_API_TOKEN)", auth: "service" },
    ]
  : [
      { key: "rust", label: "Rust (build/)", buildDir: path.join(ROOT, "build") },
      { key: "js", label: "JavaScript reference (bench/reference/)", buildDir: path.join(ROOT, "bench/reference") },
    ];
const [FIRST, SECOND] = WORKERS.map((w) => w.key);
const LUA = path.join(ROOT, "bench/lib/wrk-rooms.lua");

const out = args.merge ?? args.out ?? path.join(ROOT, `bench/results/${ACCESS ? "access" : "compare"}.json`);

const cleanup = [];
const { log, loadavg, loadavgs } = progress("compare");
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** The median; of an even count, the mean of the middle two. */
function median(values) {
  const v = [...values].sort((a, b) => a - b);
  const m = Math.floor(v.length / 2);
  return round(v.length % 2 ? v[m] : (v[m - 1] + v[m]) / 2, 3);
}

function wrkVersion() {
  try {
    execFileSync("wrk", ["--version"], { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
  } catch (e) {
    // wrk prints its version and usage, then exits 1.
    const text = `${e.stdout ?? ""}${e.stderr ?? ""}`;
    if (/^wrk /m.test(text)) return text.split("\n")[0].replace(/ \[.*$/, "").trim();
    throw new Error("wrk is not installed (Debian: apt-get install wrk)");
  }
  return "wrk";
}

/** The workerd processes under `pid` (the worker's host process). */
function workerdPids(pid) {
  const rows = execFileSync("ps", ["-e", "-o", "pid=,ppid=,comm="], { encoding: "utf8" })
    .trim()
    .split("\n")
    .map((line) => line.trim().split(/\s+/));
  const family = new Set([String(pid)]);
  for (let grew = true; grew; ) {
    grew = false;
    for (const [p, parent] of rows) if (family.has(parent) && !family.has(p)) grew = family.add(p);
  }
  return rows.filter(([p, , command]) => family.has(p) && command.startsWith("workerd")).map(([p]) => p);
}

/** CPU time (user + system, ms) the processes have used, from /proc; null where there is none. */
function cpuMs(pids) {
  const tick = 1000 / 100; // USER_HZ, 100 on Linux
  try {
    return pids.reduce((sum, p) => {
      const fields = fs.readFileSync(`/proc/${p}/stat`, "utf8").split(") ")[1].split(" ");
      return sum + (Number(fields[11]) + Number(fields[12])) * tick;
    }, 0);
  } catch {
    return null;
  }
}

/** A worker on workerd in a process of its own (lib/serve-worker.mjs). */
async function serve(worker, vars) {
  const persistDir = tempDir(`compare-${worker.key}`);
  const host = await serveWorker({ vars, persistDir, buildDir: worker.buildDir }).catch((e) => { throw new Error(`${worker.key} worker: ${e.message}`); });
  const pids = workerdPids(host.pid);
  return {
    url: host.url,
    cpuMs: () => (pids.length ? cpuMs(pids) : null),
    stop: async () => {
      await host.stop();
      fs.rmSync(persistDir, { recursive: true, force: true });
    },
  };
}

/** One wrk run; its figures (latency in ms). `tokens`: bearer tokens, one per room or one for all. */
function wrk(url, mode, seconds, tokens = []) {
  const argv = ["-t", String(THREADS), "-c", String(CONNECTIONS), "-d", `${seconds}s`, "--timeout", "10s", "-s", LUA, url];
  const env = { ...process.env, COMPARE_MODE: mode, COMPARE_ROOMS: String(ROOMS), COMPARE_PREFIX: `cmp-${mode}`, COMPARE_THREADS: String(THREADS), COMPARE_TOKENS: tokens.join(",") };
  return new Promise((resolve, reject) => {
    const child = spawn("wrk", argv, { env, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (c) => (stdout += c));
    child.stderr.on("data", (c) => (stderr += c));
    child.once("error", reject);
    child.once("exit", (code) => {
      const line = stdout.split("\n").find((l) => l.startsWith("WRK_JSON "));
      if (code !== 0 || !line) return reject(new Error(`wrk exited ${code}: ${stderr || stdout}`));
      const w = JSON.parse(line.slice("WRK_JSON ".length));
      const errors = w.errors.connect + w.errors.read + w.errors.write + w.errors.status + w.errors.timeout;
      const ms = (us) => round(us / 1000, 3);
      resolve({
        requests: w.requests,
        seconds: round(w.durationUs / 1e6, 3),
        requestsPerSec: round(w.requests / (w.durationUs / 1e6), 1),
        p50Ms: ms(w.latencyUs.p50),
        p90Ms: ms(w.latencyUs.p90),
        p99Ms: ms(w.latencyUs.p99),
        maxMs: ms(w.latencyUs.max),
        meanMs: ms(w.latencyUs.mean),
        errors,
        errorKinds: w.errors,
      });
    });
  });
}

/** Rooms as the Lua script names them, each in the state the measured requests expect. */
async function prepare(base, mode) {
  const rooms = Array.from({ length: ROOMS }, (_, k) => `cmp-${mode}-${k}`);
  const headers = ACCESS ? { authorization: `Bearer ${SERVICE_TOKEN}` } : {};
  if (mode === "message" || mode === "history") {
    // 10 exchanges = 20 messages: every measured request sees a full window.
    const result = await load({ count: ROOMS * 10, concurrency: CONNECTIONS, maxMs: 120_000, request: (i) => postJson(`${base}/api/rooms/${rooms[i % ROOMS]}/message`, { text: `warm ${i}` }, headers) });
    if (result.errors) throw new Error(`filling the rooms: ${result.firstError}`);
  } else if (mode === "exec") {
    const result = await load({ count: ROOMS, concurrency: CONNECTIONS, maxMs: 60_000, request: (i) => postJson(`${base}/api/rooms/${rooms[i]}/sandbox/exec`, { cmd: "true" }, headers) });
    if (result.errors) throw new Error(`starting the shells: ${result.firstError}`);
  }
  if (!ACCESS) return {};
  // A writer's room token per room, in the rooms' order.
  const room = [];
  for (const r of rooms) room.push(JSON.parse(await postJson(`${base}/api/rooms/${r}/invites`, { role: "writer" }, headers)).token);
  return { room, service: [SERVICE_TOKEN] };
}

function summarize(rounds) {
  const pick = (k) => median(rounds.map((r) => r[k]));
  const kinds = {};
  for (const r of rounds) for (const [k, v] of Object.entries(r.errorKinds)) kinds[k] = (kinds[k] ?? 0) + v;
  return {
    requestsPerSec: pick("requestsPerSec"),
    p50Ms: pick("p50Ms"),
    p90Ms: pick("p90Ms"),
    p99Ms: pick("p99Ms"),
    cpuUsPerRequest: rounds.every((r) => r.cpuUsPerRequest !== null) ? pick("cpuUsPerRequest") : null,
    requests: rounds.reduce((a, r) => a + r.requests, 0),
    errors: rounds.reduce((a, r) => a + r.errors, 0),
    errorKinds: kinds,
    rounds,
  };
}

async function measure(endpoint, servers) {
  log(`${endpoint.label}: preparing rooms`);
  // Both sides of --access share one worker: its rooms are prepared once.
  const tokens = {};
  for (const w of ACCESS ? WORKERS.slice(0, 1) : WORKERS) Object.assign(tokens, await prepare(servers[w.key].url, endpoint.key));
  const tokensOf = (w) => tokens[w.auth] ?? [];
  for (const w of WORKERS) {
    log(`${endpoint.label}: warming up ${w.key} (${WARM_SECONDS} s)`);
    await wrk(servers[w.key].url, endpoint.key, WARM_SECONDS, tokensOf(w));
  }
  loadavg(endpoint.key);
  const rounds = { [FIRST]: [], [SECOND]: [] };
  for (let i = 0; i < ROUNDS; i++) {
    // --access alternates which side goes first (AB, BA, ...): the two share
    // one worker, whose state one round leaves to the next.
    for (const w of ACCESS && i % 2 ? [...WORKERS].reverse() : WORKERS) {
      await sleep(300);
      const cpuBefore = servers[w.key].cpuMs();
      const r = await wrk(servers[w.key].url, endpoint.key, SECONDS, tokensOf(w));
      const cpuAfter = servers[w.key].cpuMs();
      // workerd's CPU per request: unlike throughput, hardly moved by what
      // else the machine runs.
      r.cpuUsPerRequest = cpuBefore === null || cpuAfter === null ? null : round(((cpuAfter - cpuBefore) * 1000) / r.requests, 1);
      rounds[w.key].push(r);
      log(`${endpoint.label}: round ${i + 1}/${ROUNDS} ${w.key}: ${r.requestsPerSec} req/s, p50 ${r.p50Ms} ms, p99 ${r.p99Ms} ms, CPU ${r.cpuUsPerRequest} µs/req, errors ${r.errors}`);
    }
  }
  const ratios = rounds[FIRST].map((r, i) => {
    const other = rounds[SECOND][i];
    return {
      throughput: round(r.requestsPerSec / other.requestsPerSec, 3),
      p50: round(r.p50Ms / other.p50Ms, 3),
      p99: round(r.p99Ms / other.p99Ms, 3),
      cpu: r.cpuUsPerRequest && other.cpuUsPerRequest ? round(r.cpuUsPerRequest / other.cpuUsPerRequest, 3) : null,
    };
  });
  return {
    label: endpoint.label,
    [FIRST]: summarize(rounds[FIRST]),
    [SECOND]: summarize(rounds[SECOND]),
    // First / second (Rust / JS, room token / service token), median of the
    // per-round ratios: throughput above 1 and latency below 1 favour the first.
    ratio: {
      throughput: median(ratios.map((r) => r.throughput)),
      p50: median(ratios.map((r) => r.p50)),
      p99: median(ratios.map((r) => r.p99)),
      cpu: ratios.every((r) => r.cpu !== null) ? median(ratios.map((r) => r.cpu)) : null,
      perRound: ratios,
    },
  };
}

try {
  const version = wrkVersion();
  const sandboxd = await startSandboxd({ root: tempDir("compare-sandboxes") });
  cleanup.push(async () => { await sandboxd.stop(); fs.rmSync(sandboxd.root, { recursive: true, force: true }); });
  const servers = {};
  let smoke = null;
  if (ACCESS) {
    log("starting the worker in token mode");
    const server = await serve({ key: "rust", buildDir: path.join(ROOT, "build") }, { SANDBOX_URL: sandboxd.url, DUET_API_TOKEN: SERVICE_TOKEN });
    cleanup.push(() => server.stop());
    for (const w of WORKERS) servers[w.key] = server;
  } else {
    log("starting both workers");
    for (const w of WORKERS) {
      servers[w.key] = await serve(w, { SANDBOX_URL: sandboxd.url });
      cleanup.push(() => servers[w.key].stop());
    }
    log("checking that both give the same answers");
    smoke = await compareAnswers({ rust: servers.rust.url, js: servers.js.url });
    if (smoke.differences.length) {
      console.error(JSON.stringify(smoke.differences, null, 1));
      throw new Error(`the workers answer differently (${smoke.differences.length} differences; see above)`);
    }
  }

  const endpoints = {};
  for (const e of ENDPOINTS) endpoints[e.key] = await measure(e, servers);
  loadavg("end");

  // Histories stayed bounded through the load.
  const windows = {};
  for (const w of endpoints.message && !ACCESS ? WORKERS : []) {
    const body = JSON.parse(await (await fetch(`${servers[w.key].url}/api/rooms/cmp-message-0/messages`)).text());
    windows[w.key] = body.messages.length;
  }

  const section = {
    date: new Date().toISOString(),
    quick: QUICK,
    settings: { rounds: ROUNDS, seconds: SECONDS, warmSeconds: WARM_SECONDS, connections: CONNECTIONS, threads: THREADS, rooms: ROOMS, wrk: version, order: ACCESS ? `${FIRST} first in odd rounds, ${SECOND} first in even ones` : `each round: ${FIRST}, then ${SECOND}` },
    workers: Object.fromEntries(WORKERS.map((w) => [w.key, w.label])),
    smoke: smoke && { requests: smoke.requests, differences: 0 },
    historyWindowAfterLoad: windows,
    load: loadavgs,
    endpoints,
  };
  writeSection(out, { merge: Boolean(args.merge), key: ACCESS ? "access" : "compare", section });
  log(`wrote ${path.relative(ROOT, out)}`);
  const f = (s) => `${s.requestsPerSec} req/s, p50 ${s.p50Ms} ms, p99 ${s.p99Ms} ms, CPU ${s.cpuUsPerRequest} µs/req, ${s.errors} errors`;
  for (const e of Object.values(endpoints)) log(`${e.label}: ${FIRST} ${f(e[FIRST])} | ${SECOND} ${f(e[SECOND])} | ${FIRST}/${SECOND} throughput ${e.ratio.throughput}, p99 ${e.ratio.p99}, CPU ${e.ratio.cpu}`);
} finally {
  for (const f of cleanup.reverse()) await Promise.resolve(f()).catch(() => {});
}

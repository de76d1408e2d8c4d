// Measures the worker on workerd, sandboxd alone and the floors under them,
// on this machine, and writes bench/results/latest.json. Run through
// `bash bench/run`, which builds what is missing first.
//
// Every loop is bounded in count and time; everything listens on 127.0.0.1.
import { execFileSync, spawn } from "node:child_process";
import fs from "node:fs";
import http from "node:http";
import os from "node:os";
import path from "node:path";

import { freePort, ROOT, startSandboxd, startWorker, tempDir } from "../tests/e2e/support/stack.mjs";
import { call, load, median, paced, postJson, round, stats } from "./lib/load.mjs";
import { serveWorker } from "./lib/worker-process.mjs";

const QUICK = process.env.BENCH_QUICK === "1"; // a short smoke run of the whole suite
const scale = (n) => (QUICK ? Math.max(1, Math.ceil(n / 10)) : n);
const out = process.argv[2] ?? path.join(ROOT, "bench/results/latest.json");
const spawnBin = process.argv[3] ?? path.join(ROOT, "bench/.build/spawn");
const LEVELS = [1, 8, 32];
const results = { date: new Date().toISOString(), quick: QUICK, machine: machine(), load: [], sections: {} };
const cleanup = [];

function log(...a) {
  console.error(`[${(performance.now() / 1000).toFixed(1)}s]`, ...a);
}
function loadavg(label) {
  results.load.push({ label, at: new Date().toISOString(), loadavg: os.loadavg().map((x) => round(x, 2)) });
}
function sh(cmd, args) {
  try {
    return execFileSync(cmd, args, { encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] }).trim();
  } catch {
    return null;
  }
}
function machine() {
  const cpuinfo = fs.readFileSync("/proc/cpuinfo", "utf8");
  const osRelease = fs.existsSync("/etc/os-release") ? fs.readFileSync("/etc/os-release", "utf8") : "";
  const pkg = (name) => JSON.parse(fs.readFileSync(path.join(ROOT, "node_modules", name, "package.json"), "utf8")).version;
  return {
    nproc: Number(sh("nproc", [])) || os.cpus().length,
    cpuModel: (cpuinfo.match(/^model name\s*:\s*(.*)$/m) || [])[1] ?? "unknown",
    memoryGiB: round(os.totalmem() / 2 ** 30, 1),
    os: (osRelease.match(/^PRETTY_NAME="?([^"\n]*)"?/m) || [])[1] ?? os.type(),
    kernel: os.release(),
    rustc: sh("rustc", ["--version"]),
    node: process.version,
    workerd: sh(path.join(ROOT, "node_modules/.bin/workerd"), ["--version"]) ?? `npm workerd ${pkg("workerd")}`,
    miniflare: pkg("miniflare"),
    wrangler: pkg("wrangler"),
  };
}

/** A trivial HTTP server in its own process answering 200 "ok": the loopback floor. */
async function startFloorServer() {
  const port = await freePort();
  const child = spawn(process.execPath, ["-e", `require("http").createServer((q, s) => { q.resume(); q.on("end", () => s.end("ok")); }).listen(${port}, "127.0.0.1", () => console.log("up"))`], { stdio: ["ignore", "pipe", "inherit"] });
  await new Promise((resolve, reject) => {
    child.stdout.once("data", resolve);
    child.once("exit", () => reject(new Error("floor server exited")));
  });
  return { url: `http://127.0.0.1:${port}`, stop: () => child.kill() };
}

async function floors() {
  log("floors: fork+exec of /bin/true");
  loadavg("floors");
  const raw = JSON.parse(execFileSync(spawnBin, [String(scale(2000)), "20"], { encoding: "utf8" }));
  const spawnFloor = { forkExec: stats(raw.forkExec), commandSpawn: stats(raw.commandSpawn) };
  log("floors: loopback HTTP round trip");
  const server = await startFloorServer();
  cleanup.push(server.stop);
  const httpFloor = {};
  await load({ count: 200, concurrency: 8, request: () => call(`${server.url}/`) }); // warm-up
  for (const c of LEVELS) httpFloor[`c${c}`] = await load({ count: scale(c === 1 ? 3000 : 6000), concurrency: c, request: () => call(`${server.url}/`) });
  server.stop();
  results.sections.floors = { spawn: spawnFloor, http: httpFloor };
}

const exec = (base, name, cmd) => postJson(`${base}/v1/sandboxes/${name}/exec`, { cmd });
function checkExec(body) {
  const r = JSON.parse(body);
  if (r.exitCode !== 0) throw new Error(`exit ${r.exitCode}: ${r.stderr?.slice(0, 200)}`);
  return r;
}

async function sandboxdAlone(sandboxd) {
  const s = {};
  loadavg("sandboxd");
  const base = sandboxd.url;
  log("sandboxd: true, echo hi, /bin/true at concurrency 1");
  checkExec(await exec(base, "lat", "true")); // creates the sandbox
  for (const [key, cmd] of [["true", "true"], ["echoHi", "echo hi"], ["binTrue", "/bin/true"]]) {
    await load({ count: 50, concurrency: 1, request: async () => checkExec(await exec(base, "lat", cmd)) });
    s[key] = await load({ count: scale(1000), concurrency: 1, request: async () => checkExec(await exec(base, "lat", cmd)) });
  }
  log("sandboxd: true at concurrency 8 and 32, one sandbox per client");
  s.trueConcurrent = {};
  for (const c of LEVELS) {
    const names = Array.from({ length: c }, (_, k) => `conc-${c}-${k}`);
    await Promise.all(names.map(async (n) => checkExec(await exec(base, n, "true"))));
    s.trueConcurrent[`c${c}`] = await load({ count: scale(c === 1 ? 1000 : 3000), concurrency: c, request: async (i, slot) => checkExec(await exec(base, names[slot], "true")) });
  }

  log("sandboxd: burst of 50 parallel commands across 50 sandboxes (new, then again warm)");
  for (const phase of ["cold", "warm"]) {
    const lat = [];
    const t = performance.now();
    await Promise.all(
      Array.from({ length: 50 }, async (_, k) => {
        const t0 = performance.now();
        checkExec(await exec(base, `burst-${k}`, "echo hi"));
        lat.push(performance.now() - t0);
      }),
    );
    s[`burst50${phase === "cold" ? "Cold" : "Warm"}`] = { wallMs: round(performance.now() - t), ...stats(lat) };
  }

  const seconds = QUICK ? 10 : 60;
  log(`sandboxd: 5 commands a second for ${seconds} s`);
  loadavg("sandboxd steady 5/s");
  const samples = await paced({ count: seconds * 5, intervalMs: 200, request: async (i) => checkExec(await exec(base, "steady", i % 2 ? "true" : "echo hi")) });
  const window = (from, to) => stats(samples.filter((x) => x.ms !== undefined && x.atMs >= from * 1000 && x.atMs < to * 1000).map((x) => x.ms));
  const buckets = [];
  for (let from = 0; from < seconds; from += 10) buckets.push({ from, to: from + 10, ...window(from, from + 10) });
  s.steady = {
    ratePerSecond: 5,
    seconds,
    errors: samples.filter((x) => x.error).length,
    all: stats(samples.filter((x) => x.ms !== undefined).map((x) => x.ms)),
    first10s: window(0, 10),
    last10s: window(seconds - 10, seconds),
    buckets,
    maxScheduleLagMs: round(Math.max(...samples.map((x) => x.lagMs ?? 0))),
    series: samples.map((x) => [round(x.atMs / 1000, 2), x.ms === undefined ? null : round(x.ms, 2)]),
  };

  log("sandboxd: one command printing 10 MB");
  const bigCmd = "head -c 10000000 /dev/zero | tr '\\0' a";
  const big = async (url) => {
    const times = [];
    let last;
    for (let i = 0; i < (QUICK ? 1 : 5); i++) {
      const t = performance.now();
      last = checkExec(await exec(url, "big", bigCmd));
      times.push(performance.now() - t);
    }
    return { runs: times.map((x) => round(x)), medianMs: median(times), stdoutBytesReturned: Buffer.byteLength(last.stdout), truncated: last.truncated ?? null };
  };
  s.output10MB = { defaultLimit: await big(base) };
  const wide = await startWide();
  s.output10MB.limit16MiB = await big(wide.url);
  await wide.stop();
  results.sections.sandboxd = s;
}

/** A second sandboxd that keeps up to 16 MiB per stream, so the 10 MB come back whole. */
async function startWide() {
  const sandboxd = await startSandboxd({ root: tempDir("sandboxes-wide"), args: ["--output-limit", String(16 * 2 ** 20)] });
  return { url: sandboxd.url, stop: async () => { await sandboxd.stop(); fs.rmSync(sandboxd.root, { recursive: true, force: true }); } };
}

/** The built worker's cold start and, run for run after it, the JavaScript reference's. */
async function coldStart(sandboxd) {
  const runs = [];
  const reference = [];
  const n = QUICK ? 2 : 7;
  loadavg("cold start");
  for (let i = 0; i < n; i++) {
    log(`cold start ${i + 1}/${n}`);
    runs.push(await coldStartOnce(sandboxd, i));
    reference.push(await coldStartOnce(sandboxd, i, path.join(ROOT, "bench/reference")));
  }
  const medians = (rs) => Object.fromEntries(Object.keys(rs[0]).map((k) => [k, median(rs.map((r) => r[k]))]));
  results.sections.coldStart = { runs, median: medians(runs), reference: { runs: reference, median: medians(reference) } };
}

async function coldStartOnce(sandboxd, i, buildDir) {
  const persistDir = tempDir("bench-cold");
  const t0 = performance.now();
  const w = await startWorker({ vars: { SANDBOX_URL: sandboxd.url }, persistDir, buildDir });
  const tReady = performance.now();
  let status = 0;
  for (let k = 0; k < 200 && status !== 200; k++) {
    try {
      status = (await fetch(`${w.url}/health`)).status;
    } catch {
      await new Promise((r) => setTimeout(r, 10));
    }
  }
  const tHealth = performance.now();
  const room = `cold-${Date.now()}-${i}`;
  await postJson(`${w.url}/api/rooms/${room}/message`, { text: "hello" });
  const tMsg = performance.now();
  await postJson(`${w.url}/api/rooms/${room}/message`, { text: "hello again" });
  const tMsg2 = performance.now();
  await postJson(`${w.url}/api/rooms/${room}/sandbox/exec`, { cmd: "true" });
  const tExec = performance.now();
  await w.stop();
  fs.rmSync(persistDir, { recursive: true, force: true });
  return { toReadyMs: round(tReady - t0), toFirstHealthMs: round(tHealth - t0), firstMessageMs: round(tMsg - tHealth), secondMessageMs: round(tMsg2 - tMsg), firstExecNewSandboxMs: round(tExec - tMsg2) };
}

async function workerLatency(sandboxd) {
  const persistDir = tempDir("bench-worker");
  const w = await serveWorker({ vars: { SANDBOX_URL: sandboxd.url }, persistDir });
  cleanup.push(() => w.stop());
  const base = w.url;
  const s = { health: {}, history: {}, message: {}, exec: {} };
  loadavg("worker /health");
  log("worker: GET /health");
  await load({ count: 300, concurrency: 8, request: () => call(`${base}/health`) });
  for (const c of LEVELS) s.health[`c${c}`] = await load({ count: scale(c === 1 ? 2000 : 4000), concurrency: c, request: () => call(`${base}/health`) });

  // Front worker + one Durable Object hop + one SQLite read, no sandboxd:
  // separates the object hop from the call to sandboxd in /sandbox/exec.
  log("worker: GET /messages of an empty room (the Durable Object hop alone)");
  const emptyRoom = `history-${Date.now()}`;
  await load({ count: 50, concurrency: 1, request: () => call(`${base}/api/rooms/${emptyRoom}/messages`) });
  s.history = { c1: await load({ count: scale(1000), concurrency: 1, request: () => call(`${base}/api/rooms/${emptyRoom}/messages`) }) };

  loadavg("worker /message");
  log("worker: POST /message (rooms filled to the 20-message window first)");
  for (const c of LEVELS) {
    const rooms = Array.from({ length: c }, (_, k) => `msg-${c}-${k}-${Date.now()}`);
    // 10 exchanges = 20 messages: every measured request sees a full window.
    await Promise.all(rooms.map(async (r) => { for (let k = 0; k < 10; k++) await postJson(`${base}/api/rooms/${r}/message`, { text: `warm ${k}` }); }));
    s.message[`c${c}`] = await load({
      count: scale(c === 1 ? 300 : 960),
      concurrency: c,
      request: async (i, slot) => {
        const body = JSON.parse(await postJson(`${base}/api/rooms/${rooms[slot]}/message`, { text: `bench message ${i}` }));
        if (body.reply !== `echo: bench message ${i}`) throw new Error(`unexpected reply ${body.reply}`);
      },
    });
  }

  loadavg("worker /sandbox/exec");
  log("worker: POST /sandbox/exec true (one room per client)");
  for (const c of LEVELS) {
    const rooms = Array.from({ length: c }, (_, k) => `exec-${c}-${k}-${Date.now()}`);
    await Promise.all(rooms.map(async (r) => { for (let k = 0; k < 5; k++) await postJson(`${base}/api/rooms/${r}/sandbox/exec`, { cmd: "true" }); }));
    s.exec[`c${c}`] = await load({
      count: scale(c === 1 ? 1000 : 1600),
      concurrency: c,
      request: async (i, slot) => {
        const body = JSON.parse(await postJson(`${base}/api/rooms/${rooms[slot]}/sandbox/exec`, { cmd: "true" }));
        if (body.result?.exitCode !== 0) throw new Error(`exit ${body.result?.exitCode}`);
      },
    });
  }
  await w.stop();
  cleanup.pop();
  fs.rmSync(persistDir, { recursive: true, force: true });
  results.sections.worker = s;
}

/** The agent loop: a /message by the number of model answers it takes (scripted model, `true`-fast commands). */
async function rounds(sandboxd) {
  const w = await serveWorker({ vars: { SANDBOX_URL: sandboxd.url }, persistDir: tempDir("bench-rounds") });
  cleanup.push(() => w.stop());
  const scripts = { 1: "hello", 2: "steps true", 4: "forever" };
  const s = {};
  loadavg("agent loop rounds");
  for (const [n, text] of Object.entries(scripts)) {
    log(`agent loop: ${n} round(s)`);
    s[`rounds${n}`] = await load({
      count: scale(60),
      concurrency: 1,
      request: async (i) => {
        const body = JSON.parse(await postJson(`${w.url}/api/rooms/rounds-${n}-${i}/message`, { text }));
        // One command per answer but the last (every answer of `forever` runs one).
        const commands = (body.reply.match(/^Output \(/gm) ?? []).length;
        if (commands !== { 1: 0, 2: 1, 4: 4 }[n]) throw new Error(`${commands} commands for ${n} answers: ${body.reply.slice(0, 200)}`);
      },
    });
  }
  await w.stop();
  cleanup.pop();
  results.sections.rounds = s;
}

/**
 * Rooms that sleep: sandboxd's archive (save) and restore of a small and a
 * 50 MB workspace, and the first command of a woken room through the worker
 * (sleep after 1 idle second; the restore is part of that command).
 */
async function lifecycle(sandboxd) {
  const s = { save: {}, restore: {}, wake: {} };
  const sizes = { small: "printf 'hello\\n' > a.txt && mkdir -p src && seq 1000 > src/n.txt", mb50: "for i in $(seq 50); do head -c 786432 /dev/urandom | base64 -w 0 > blob$i.txt; done" };
  loadavg("lifecycle");
  for (const [size, make] of Object.entries(sizes)) {
    log(`lifecycle: save and restore (${size})`);
    const name = `sandbox-bench-life-${size}`;
    await postJson(`${sandboxd.url}/v1/sandboxes/${name}/exec`, { cmd: make, timeoutMs: 60_000 });
    const saves = [], restores = [];
    let bytes = 0;
    for (let i = 0; i < (QUICK ? 2 : 5); i++) {
      let t = performance.now();
      const archive = Buffer.from(await (await fetch(`${sandboxd.url}/v1/sandboxes/${name}/archive`)).arrayBuffer());
      saves.push(performance.now() - t);
      bytes = archive.length;
      t = performance.now();
      const res = await fetch(`${sandboxd.url}/v1/sandboxes/${name}/archive`, { method: "PUT", body: archive });
      if (!res.ok) throw new Error(`restore: ${res.status} ${await res.text()}`);
      restores.push(performance.now() - t);
    }
    s.save[size] = { archiveBytes: bytes, ...stats(saves) };
    s.restore[size] = stats(restores);
    await fetch(`${sandboxd.url}/v1/sandboxes/${name}`, { method: "DELETE" });

    log(`lifecycle: a woken room's first command (${size})`);
    const w = await serveWorker({ vars: { SANDBOX_URL: sandboxd.url, SANDBOX_IDLE_SECONDS: "1" }, persistDir: tempDir("bench-wake") });
    cleanup.push(() => w.stop());
    const wakes = [];
    for (let i = 0; i < (QUICK ? 1 : 3); i++) {
      const room = `wake-${size}-${i}-${Date.now()}`;
      await postJson(`${w.url}/api/rooms/${room}/sandbox/exec`, { cmd: make, timeoutMs: 25_000 });
      // Asleep once sandboxd no longer has the room's workspace.
      const workspace = path.join(sandboxd.root, `sandbox-${room}`);
      for (let k = 0; k < 600 && fs.existsSync(workspace); k++) await new Promise((r) => setTimeout(r, 100));
      await new Promise((r) => setTimeout(r, 200));
      const t = performance.now();
      const body = JSON.parse(await postJson(`${w.url}/api/rooms/${room}/sandbox/exec`, { cmd: "ls | wc -l" }));
      wakes.push(performance.now() - t);
      if (body.result?.exitCode !== 0) throw new Error(`woken exec: ${JSON.stringify(body).slice(0, 200)}`);
    }
    s.wake[size] = stats(wakes);
    await w.stop();
    cleanup.pop();
  }
  results.sections.lifecycle = s;
}

function derive() {
  const { floors: f, sandboxd: d, worker: w } = results.sections;
  const forkP50 = f.spawn.forkExec.p50;
  const httpP50 = f.http.c1.p50;
  results.derived = {
    sandboxdTrueP50: d.true.p50,
    sandboxdAddedForTrueP50: round(d.true.p50 - httpP50),
    forkExecP50: forkP50,
    sandboxdAddedVsForkExec: round((d.true.p50 - httpP50) / forkP50, 2),
    sandboxdTotalVsForkExec: round(d.true.p50 / forkP50, 2),
    workerAddsToExecP50: round(w.exec.c1.p50 - d.true.p50),
    workerAddsToExecP99: round(w.exec.c1.p99 - d.true.p99),
    workerHealthOverFloorP50: round(w.health.c1.p50 - httpP50),
    objectHopP50: round(w.history.c1.p50 - w.health.c1.p50),
    sandboxdCallFromObjectP50: round(w.exec.c1.p50 - w.history.c1.p50 - d.true.p50),
  };
}

try {
  // Many sandboxes at once (bursts, one per client): above sandboxd's default cap of shells.
  const sandboxd = await startSandboxd({ root: tempDir("bench-sandboxes"), args: ["--max-sessions", "1024"] });
  cleanup.push(async () => { await sandboxd.stop(); fs.rmSync(sandboxd.root, { recursive: true, force: true }); });
  const upload = path.join(path.dirname(out), "upload.json");
  if (fs.existsSync(upload)) results.sections.upload = JSON.parse(fs.readFileSync(upload, "utf8"));
  await floors();
  await sandboxdAlone(sandboxd);
  await coldStart(sandboxd);
  await workerLatency(sandboxd);
  await rounds(sandboxd);
  await lifecycle(sandboxd);
  loadavg("end");
  derive();
  fs.mkdirSync(path.dirname(out), { recursive: true });
  fs.writeFileSync(out, JSON.stringify(results, null, 1) + "\n");
  log(`wrote ${path.relative(ROOT, out)}`);
} finally {
  for (const f of cleanup.reverse()) await Promise.resolve(f()).catch(() => {});
}

// Where a warm request's CPU goes, from workerd's own V8 profiler: serves
// the Rust worker (or the JavaScript reference) with the inspector open,
// loads one endpoint with wrk (a separate process, bench/lib/wrk-rooms.lua)
// and samples the worker's isolate while it runs. Prints the share of the
// samples by kind (the worker's wasm, the generated JavaScript glue, each
// runtime API, idle) and the wasm functions that cost most: with names when
// the wasm keeps them, i.e. built with CARGO_PROFILE_RELEASE_STRIP=false.
//
//   node bench/profile.mjs [--worker rust|js] [--endpoint health|message|exec|history] [--seconds 5]
//
// The inspector adds costs of its own (each console.log is also sent to it),
// so compare profiles with each other, not with bench/compare.mjs.
import { spawn } from "node:child_process";
import path from "node:path";
import { parseArgs } from "node:util";

import { freePort, ROOT, startSandboxd, startWorker } from "../tests/e2e/support/stack.mjs";

const { values: args } = parseArgs({
  options: {
    worker: { type: "string", default: "rust" },
    endpoint: { type: "string", default: "message" },
    seconds: { type: "string", default: "5" },
  },
});
const buildDir = path.join(ROOT, args.worker === "js" ? "bench/reference" : "build");

function wrk(url, seconds) {
  const argv = ["-t", "2", "-c", "8", "-d", `${seconds}s`, "-s", path.join(ROOT, "bench/lib/wrk-rooms.lua"), url];
  const env = { ...process.env, COMPARE_MODE: args.endpoint, COMPARE_ROOMS: "50", COMPARE_PREFIX: "profile", COMPARE_THREADS: "2" };
  return new Promise((resolve, reject) => {
    const child = spawn("wrk", argv, { env, stdio: ["ignore", "pipe", "inherit"] });
    let out = "";
    child.stdout.on("data", (c) => (out += c));
    child.once("error", reject);
    child.once("exit", () => resolve(JSON.parse(out.split("\n").find((l) => l.startsWith("WRK_JSON ")).slice(9))));
  });
}

/** One DevTools protocol session on the worker's isolate. */
async function inspect(port) {
  const ws = new WebSocket(`ws://127.0.0.1:${port}/core:user:duet`);
  await new Promise((resolve, reject) => {
    ws.addEventListener("open", resolve);
    ws.addEventListener("error", reject);
  });
  const pending = new Map();
  let id = 0;
  ws.addEventListener("message", (e) => {
    const m = JSON.parse(e.data);
    pending.get(m.id)?.(m.result);
    pending.delete(m.id);
  });
  return {
    send: (method, params = {}) => new Promise((resolve) => {
      pending.set(++id, resolve);
      ws.send(JSON.stringify({ id, method, params }));
    }),
    close: () => ws.close(),
  };
}

/** What kind of work a profile node is. */
function kind({ functionName: name, url }) {
  if (url.includes(".wasm")) return name.startsWith("js-to-wasm") || name.startsWith("wasm-to-js") ? "JS↔wasm transitions" : "wasm (the worker's Rust)";
  if (name.startsWith("__wbg") || name.startsWith("__wbindgen")) return `glue: ${name.replace(/^__wbg_/, "").replace(/_[0-9a-f]{16}$/, "")}`;
  if (url.endsWith("index.js")) return "worker's JavaScript (shim or reference)";
  if (url.startsWith("cloudflare-internal:")) return `runtime module ${url}`;
  return name ? `runtime: ${name}` : "runtime: (anonymous native)";
}

const sandboxd = args.endpoint === "exec" ? await startSandboxd() : undefined;
const inspectorPort = await freePort();
const worker = await startWorker({ buildDir, inspectorPort, vars: sandboxd ? { SANDBOX_URL: sandboxd.url } : {} });
try {
  await wrk(worker.url, 3); // fills the rooms' histories, starts the shells, warms up
  const session = await inspect(inspectorPort);
  await session.send("Profiler.enable");
  await session.send("Profiler.setSamplingInterval", { interval: 50 });
  await session.send("Profiler.start");
  const load = await wrk(worker.url, Number(args.seconds));
  const { profile } = await session.send("Profiler.stop");
  session.close();

  const self = new Map(profile.nodes.map((n) => [n.id, 0]));
  profile.samples.forEach((id, i) => self.set(id, self.get(id) + (profile.timeDeltas[i] ?? 0)));
  const total = [...self.values()].reduce((a, b) => a + b, 0);
  const kinds = new Map();
  const wasm = new Map();
  for (const n of profile.nodes) {
    const t = self.get(n.id);
    const k = ["(idle)", "(program)", "(garbage collector)"].includes(n.callFrame.functionName) ? n.callFrame.functionName : kind(n.callFrame);
    kinds.set(k, (kinds.get(k) ?? 0) + t);
    if (k === "wasm (the worker's Rust)") {
      const f = n.callFrame.functionName.replace(/::h[0-9a-f]{16}$/, "").replace(/\[[0-9a-f]{16}\]/g, "");
      wasm.set(f, (wasm.get(f) ?? 0) + t);
    }
  }
  const share = (t) => `${((100 * t) / total).toFixed(1).padStart(5)}%`;
  const top = (m, n) => [...m].sort((a, b) => b[1] - a[1]).slice(0, n);
  console.log(`${args.worker} ${args.endpoint}: ${load.requests} requests in ${args.seconds} s under the profiler; samples by kind:`);
  for (const [k, t] of top(kinds, 30)) console.log(`${share(t)}  ${k}`);
  console.log("wasm functions:");
  for (const [f, t] of top(wasm, 25)) console.log(`${share(t)}  ${f.slice(0, 140)}`);
} finally {
  await worker.stop();
  await sandboxd?.stop();
}

// What a room's container costs on a real Docker engine (scripts/engine/engine),
// beside the same through SANDBOX_URL (one sandboxd on this machine):
//
// - a cold room's first command (`true`): on the container path workerd
//   creates and starts the room's networking sidecar and its container from
//   the Dockerfile's image, the Sandbox object waits for sandboxd's health
//   route, then runs the command; through SANDBOX_URL sandboxd starts a bash
//   for the room. Then the room's second command, warm, for reference;
// - a sleeping room's wake: a room with a small workspace is left idle for a
//   second, sleeps (its files saved in the object, its container removed or
//   its sandbox deleted), and its next command is timed: on the container
//   path a fresh container, its health, the files restored, the command.
//
// Each path is a worker on workerd in a process of its own; this process is
// the client, one request at a time. Every answer is checked.
//
//   node bench/engine.mjs                   # writes bench/results/engine.json
//   node bench/engine.mjs --merge FILE.json # sets FILE's sections.engine
//   BENCH_QUICK=1 node bench/engine.mjs     # 3 rooms per measurement instead of 9
import fs from "node:fs";
import path from "node:path";
import { parseArgs } from "node:util";

import { SANDBOX_IMAGE, SIDECAR_IMAGE, startEngine } from "../tests/e2e/support/engine.mjs";
import { ROOT, startSandboxd, tempDir } from "../tests/e2e/support/stack.mjs";
import { until } from "../tests/e2e/support/wait.mjs";
import { stats } from "./lib/load.mjs";
import { writeSection } from "./lib/results.mjs";
import { serveWorker } from "./lib/worker-process.mjs";

const { values: args } = parseArgs({ options: { merge: { type: "string" } } });
const QUICK = !!process.env.BENCH_QUICK;
const ROOMS = QUICK ? 3 : 9;
const WORKSPACE = "printf 'hello\\n' > a.txt && mkdir -p src && seq 1000 > src/n.txt";
const log = (line) => process.stderr.write(`engine: ${line}\n`);

/** One command through the worker: its time in ms; throws unless it ran and succeeded. */
async function timed(url, room, cmd) {
  const started = performance.now();
  const res = await fetch(`${url}/api/rooms/${room}/sandbox/exec`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ cmd, timeoutMs: 25_000 }),
    signal: AbortSignal.timeout(30_000),
  });
  const ms = performance.now() - started;
  const body = await res.text();
  if (res.status !== 200 || JSON.parse(body).result?.exitCode !== 0) throw new Error(`${cmd} in ${room}: ${res.status} ${body.slice(0, 200)}`);
  return ms;
}

/** A cold room's first command and its second, on the worker at `url`. */
async function coldAndWarm(name, url) {
  const cold = [], warm = [];
  for (let i = 0; i < ROOMS; i++) {
    const room = `bench-${name}-${Date.now()}-${i}`;
    cold.push(await timed(url, room, "true"));
    warm.push(await timed(url, room, "true"));
  }
  log(`${name}: cold ${stats(cold).p50} ms, warm ${stats(warm).p50} ms (p50)`);
  return { cold: stats(cold), warm: stats(warm) };
}

/** A sleeping room's first command, on the worker at `url`; `asleep(room)` resolves once the room sleeps. */
async function wakes(name, url, asleep) {
  const wake = [];
  for (let i = 0; i < ROOMS; i++) {
    const room = `bench-${name}-wake-${Date.now()}-${i}`;
    await timed(url, room, WORKSPACE);
    await asleep(room);
    wake.push(await timed(url, room, "test \"$(cat a.txt)\" = hello && test -s src/n.txt"));
  }
  log(`${name}: wake ${stats(wake).p50} ms (p50)`);
  return stats(wake);
}

/**
 * Each path is measured on two workers: one with the default idle time for
 * the cold and warm commands, one whose rooms sleep after 2 idle seconds for
 * the wakes (an idle time shorter than a container's start would put a room
 * to sleep while its first command still starts the container).
 */
const SLEEPY = { SANDBOX_IDLE_SECONDS: "2", ROOM_TTL_SECONDS: "3600" };
/** Both measurements of one path, `options` saying which (serveWorker's). */
async function onWorkers(name, options, asleep) {
  const serve = (vars) => serveWorker({ ...options, vars: { ...options.vars, ...vars }, persistDir: tempDir("bench-engine") });
  let worker = await serve({});
  try {
    const measured = await coldAndWarm(name, worker.url);
    await worker.stop();
    worker = await serve(SLEEPY);
    return { ...measured, wake: await wakes(name, worker.url, asleep) };
  } finally {
    await worker.stop();
  }
}

const section = { date: new Date().toISOString(), quick: QUICK, rooms: ROOMS };

const engine = startEngine();
{
  const image = await engine.imageFor("bench");
  const container = { socketPath: engine.socketPath, imageName: image, egressImage: SIDECAR_IMAGE };
  // Asleep once the engine no longer has the room's container.
  const asleep = async (room) => {
    const [c] = await engine.containersOfRoom(image, room);
    await until(`room ${room}'s container to go`, async () => !(await engine.inspect(c.id)), 30_000, { every: 50 });
  };
  const cleanup = await engine.follow(image);
  try {
    section.container = await onWorkers("container", { container }, asleep);
  } finally {
    await cleanup.removeAll();
  }
  section.engine = (await engine.api("GET", "/version")).json.Version;
  section.image = SANDBOX_IMAGE;
}
{
  const sandboxd = await startSandboxd();
  // Asleep once sandboxd no longer has the room's workspace.
  const asleep = (room) => until(`room ${room}'s sandbox to go`, () => !fs.existsSync(path.join(sandboxd.root, `sandbox-${room}`)), 30_000, { every: 50 });
  try {
    section.sandboxUrl = await onWorkers("SANDBOX_URL", { vars: { SANDBOX_URL: sandboxd.url } }, asleep);
  } finally {
    await sandboxd.stop();
  }
}
writeSection(args.merge ?? path.join(ROOT, "bench/results/engine.json"), { merge: !!args.merge, key: "engine", section });

// How fast a file of 8 MiB (the most a PUT takes, and a GET answers whole)
// goes into a room's workspace and comes out of it through the worker, beside
// the same bytes through the shell, measured in the same run:
//
// - PUT and GET `/api/rooms/{roomId}/files?path=P`: the front worker, the
//   room's Sandbox object, which relays the body to sandboxd and its answer
//   back, streamed both ways;
// - the floor: the same PUT and GET straight to sandboxd's own files route
//   (`/v1/sandboxes/{name}/files?path=P`, a sandbox of its own), so that
//   the difference is the worker's share;
// - through `POST /api/rooms/{roomId}/sandbox/exec`, the way a client
//   without the files route would do it: a command is at most 8,000
//   characters and an exec's stdout is cut at 1 MiB, so a write is many
//   `printf %s '<base64>' | base64 -d >> f` commands (WRITE_CHUNK bytes
//   each, 7,936 characters of base64), and a read a few `tail -c +N f |
//   head -c READ_CHUNK | base64 -w0` commands, decoded here.
//
// Every transfer is checked byte for byte, so that a wrong figure is a
// failure rather than a result: each write carries fresh random bytes, and
// the file's sha256 is then taken by `sha256sum` in the sandbox's shell
// (through sandboxd's own /exec for the floor's sandbox); each read's bytes
// are hashed here against those of the file it read. Every exec is checked
// too (exit code 0, nothing on stderr, nothing cut).
//
// The worker runs on workerd in a process of its own (lib/worker-process.mjs)
// and sandboxd in another; this process is the client. The transfers run
// one at a time; in each run the worker's PUT and the floor's, then their
// GETs, take turns going first, so that both see the same machine.
//
//   node bench/files.mjs                   # writes bench/results/files.json
//   node bench/files.mjs --merge FILE.json # sets FILE's sections.files
//   BENCH_QUICK=1 node bench/files.mjs     # 1 run
//
// FILES_RUNS (runs, 5) overrides the default.
import { createHash, randomBytes } from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { parseArgs } from "node:util";

import { ROOT, startSandboxd, tempDir } from "../tests/e2e/support/stack.mjs";
import { round, stats } from "./lib/load.mjs";
import { progress, writeSection } from "./lib/results.mjs";
import { serveWorker } from "./lib/worker-process.mjs";

const { values: args } = parseArgs({ options: { merge: { type: "string" }, out: { type: "string" } } });
const QUICK = process.env.BENCH_QUICK === "1";
const RUNS = Number(process.env.FILES_RUNS ?? (QUICK ? 1 : 5));
const MIB = 1024 * 1024;
const SIZE = 8 * MIB; // the files route's limit, each way
const CMD_MAX = 8000; // the longest `cmd` the exec route takes
const STDOUT_MAX = MIB; // an exec's stdout past this is cut
// Whole groups of three bytes, so that each piece's base64 stands alone.
const WRITE_CHUNK = 5952; // 7,936 characters of base64
const READ_CHUNK = 786000; // 1,048,000 characters of base64
const REQUEST_LIMIT_MS = 60_000; // a bound on each request
const out = args.merge ?? args.out ?? path.join(ROOT, "bench/results/files.json");
const cleanup = [];

const { log, loadavg, loadavgs } = progress("files");
const sha256 = (bytes) => createHash("sha256").update(bytes).digest("hex");

/** `fetch`, failing on a status that is not 2xx; answers the body's bytes. */
async function fetchBytes(url, init = {}) {
  const res = await fetch(url, { ...init, signal: AbortSignal.timeout(REQUEST_LIMIT_MS) });
  const body = Buffer.from(await res.arrayBuffer());
  if (!res.ok) throw new Error(`${init.method ?? "GET"} ${url}: ${res.status} ${body.toString().slice(0, 200)}`);
  return { res, body };
}

/** The files route at `base` (the worker's room or sandboxd's sandbox): PUT and GET of raw bytes, checked. */
function filesAt(base) {
  const url = (p) => `${base}/files?path=${encodeURIComponent(p)}`;
  return {
    async put(p, bytes) {
      const { body } = await fetchBytes(url(p), { method: "PUT", headers: { "content-type": "application/octet-stream" }, body: bytes });
      const answer = JSON.parse(body.toString());
      if (answer.size !== bytes.length) throw new Error(`PUT ${p}: answered ${JSON.stringify(answer)} for ${bytes.length} bytes`);
    },
    async get(p) {
      const { res, body } = await fetchBytes(url(p));
      if (res.status !== 200 || res.headers.get("content-length") !== String(body.length)) throw new Error(`GET ${p}: ${res.status}, content-length ${res.headers.get("content-length")} for ${body.length} bytes`);
      return body;
    },
  };
}

/** An exec through `post` (the worker's route or sandboxd's own): its stdout, checked. */
async function checked(post, cmd) {
  if (cmd.length > CMD_MAX) throw new Error(`a command of ${cmd.length} characters`);
  const result = await post(cmd);
  if (result.exitCode !== 0 || result.stderr !== "" || result.truncated || result.timedOut) {
    throw new Error(`${cmd.slice(0, 60)}…: exit ${result.exitCode}, truncated ${result.truncated}, timed out ${result.timedOut}, stderr ${JSON.stringify(result.stderr.slice(0, 200))}`);
  }
  return result.stdout;
}
const workerExec = (base, room) => async (cmd) => {
  const { body } = await fetchBytes(`${base}/api/rooms/${room}/sandbox/exec`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ cmd }) });
  return JSON.parse(body.toString()).result;
};
const sandboxdExec = (base, name) => async (cmd) => {
  const { body } = await fetchBytes(`${base}/v1/sandboxes/${name}/exec`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ cmd }) });
  return JSON.parse(body.toString());
};

/** Throws unless the file at `p` in the shell behind `post` holds `bytes`, by its sha256. */
async function verify(post, p, bytes, what) {
  const sum = (await checked(post, `sha256sum ${p} | cut -c1-64`)).trim();
  if (sum !== sha256(bytes)) throw new Error(`${what}: ${p} holds sha256 ${sum}, not ${sha256(bytes)}`);
}
function same(got, bytes, what) {
  if (got.length !== bytes.length || sha256(got) !== sha256(bytes)) throw new Error(`${what}: ${got.length} bytes, sha256 ${sha256(got)}, not ${bytes.length} bytes, ${sha256(bytes)}`);
}

/** The commands that write `bytes` to `p` through the shell, in base64 pieces of WRITE_CHUNK bytes. */
function writeCommands(p, bytes) {
  const cmds = [`: > ${p}`];
  for (let at = 0; at < bytes.length; at += WRITE_CHUNK) {
    cmds.push(`printf %s '${bytes.subarray(at, at + WRITE_CHUNK).toString("base64")}' | base64 -d >> ${p}`);
  }
  return cmds;
}

/** Reads `size` bytes of `p` through the shell, READ_CHUNK at a time, decoded here. */
async function readThroughExec(post, p, size) {
  const parts = [];
  for (let at = 0; at < size; at += READ_CHUNK) {
    const stdout = await checked(post, `tail -c +${at + 1} ${p} | head -c ${READ_CHUNK} | base64 -w0`);
    if (stdout.length >= STDOUT_MAX) throw new Error(`a read's stdout of ${stdout.length} characters`);
    parts.push(Buffer.from(stdout, "base64"));
  }
  return Buffer.concat(parts);
}

/** ms that `fn` takes. */
async function timed(fn) {
  const t0 = performance.now();
  await fn();
  return performance.now() - t0;
}

/** What a list of ms per transfer of SIZE bytes comes to. */
function throughput(msList, extra = {}) {
  const s = stats(msList);
  const seconds = s.p50 / 1000;
  return {
    runsMs: msList.map((x) => round(x, 1)),
    ms: s,
    secondsPer8MiB: round(seconds, 4),
    mibPerSecond: round(SIZE / MIB / seconds, 2),
    ...extra,
  };
}

try {
  const sandboxd = await startSandboxd({ root: tempDir("bench-files-sandboxes") });
  cleanup.push(async () => { await sandboxd.stop(); fs.rmSync(sandboxd.root, { recursive: true, force: true }); });
  const persistDir = tempDir("bench-files");
  cleanup.push(() => fs.rmSync(persistDir, { recursive: true, force: true }));
  const w = await serveWorker({ vars: { SANDBOX_URL: sandboxd.url }, persistDir });
  cleanup.push(() => w.stop());

  const room = `files-${Date.now()}`;
  const floorName = `sandbox-files-floor-${Date.now()}`;
  const viaWorker = filesAt(`${w.url}/api/rooms/${room}`);
  const direct = filesAt(`${sandboxd.url}/v1/sandboxes/${floorName}`);
  const exec = workerExec(w.url, room);
  const floorExec = sandboxdExec(sandboxd.url, floorName);

  // Warm-up: both shells started, the room's objects awake, one 8 MiB each way.
  log("warm-up");
  await checked(exec, "mkdir -p bench");
  await checked(floorExec, "mkdir -p bench");
  const warm = randomBytes(SIZE);
  await viaWorker.put("bench/warm", warm);
  same(await viaWorker.get("bench/warm"), warm, "warm-up GET");
  await direct.put("bench/warm", warm);
  same(await direct.get("bench/warm"), warm, "warm-up floor GET");

  const ms = { workerPut: [], workerGet: [], floorPut: [], floorGet: [], execWrite: [], execRead: [] };
  let writeCmds, readCmds;
  for (let run = 0; run < RUNS; run++) {
    loadavg(`run ${run + 1}`);
    // Fresh bytes for every write: a file left from before cannot pass.
    const [forWorker, forFloor, forExec] = [randomBytes(SIZE), randomBytes(SIZE), randomBytes(SIZE)];
    const [putPath, execPath] = [`bench/put-${run}`, `bench/exec-${run}`];
    const floorFirst = run % 2 === 1;

    const puts = [
      async () => ms.workerPut.push(await timed(() => viaWorker.put(putPath, forWorker))),
      async () => ms.floorPut.push(await timed(() => direct.put(putPath, forFloor))),
    ];
    for (const f of floorFirst ? puts.reverse() : puts) await f();
    await verify(exec, putPath, forWorker, "the worker's PUT");
    await verify(floorExec, putPath, forFloor, "sandboxd's PUT");

    let gotWorker, gotFloor;
    const gets = [
      async () => ms.workerGet.push(await timed(async () => (gotWorker = await viaWorker.get(putPath)))),
      async () => ms.floorGet.push(await timed(async () => (gotFloor = await direct.get(putPath)))),
    ];
    for (const f of floorFirst ? gets.reverse() : gets) await f();
    same(gotWorker, forWorker, "the worker's GET");
    same(gotFloor, forFloor, "sandboxd's GET");

    // The commands are made before the clock starts; only sending them is timed.
    const cmds = writeCommands(execPath, forExec);
    writeCmds = cmds.length;
    ms.execWrite.push(await timed(async () => { for (const cmd of cmds) await checked(exec, cmd); }));
    await verify(exec, execPath, forExec, "the write through exec");

    // The read's decoding is part of getting the bytes, so it is timed.
    let gotExec;
    ms.execRead.push(await timed(async () => (gotExec = await readThroughExec(exec, putPath, SIZE))));
    same(gotExec, forWorker, "the read through exec");
    readCmds = Math.ceil(SIZE / READ_CHUNK);

    log(`run ${run + 1}/${RUNS}: PUT ${ms.workerPut.at(-1).toFixed(0)} ms (floor ${ms.floorPut.at(-1).toFixed(0)}), GET ${ms.workerGet.at(-1).toFixed(0)} ms (floor ${ms.floorGet.at(-1).toFixed(0)}), exec write ${ms.execWrite.at(-1).toFixed(0)} ms, exec read ${ms.execRead.at(-1).toFixed(0)} ms; all verified`);
    await checked(exec, `rm -f ${putPath} ${execPath}`);
    await checked(floorExec, `rm -f ${putPath}`);
  }
  loadavg("end");

  const base64Bytes = (n) => 4 * Math.ceil(n / 3);
  const worker = { put: throughput(ms.workerPut), get: throughput(ms.workerGet) };
  const floor = { put: throughput(ms.floorPut), get: throughput(ms.floorGet) };
  const execWrite = throughput(ms.execWrite, {
    commands: writeCmds,
    bytesPerCommand: WRITE_CHUNK,
    base64Bytes: base64Bytes(SIZE),
    msPerCommand: round(stats(ms.execWrite).p50 / writeCmds, 3),
  });
  const execRead = throughput(ms.execRead, {
    commands: readCmds,
    bytesPerCommand: READ_CHUNK,
    base64Bytes: base64Bytes(SIZE),
    msPerCommand: round(stats(ms.execRead).p50 / readCmds, 3),
  });
  const section = {
    date: new Date().toISOString(),
    quick: QUICK,
    settings: { runs: RUNS, bytes: SIZE, writeChunk: WRITE_CHUNK, readChunk: READ_CHUNK, cmdMax: CMD_MAX, stdoutMax: STDOUT_MAX, verified: "sha256 of every transfer" },
    load: loadavgs,
    worker,
    floor,
    exec: { write: execWrite, read: execRead },
    workerAdds: {
      putMs: round(worker.put.ms.p50 - floor.put.ms.p50, 1),
      getMs: round(worker.get.ms.p50 - floor.get.ms.p50, 1),
      putRatio: round(worker.put.ms.p50 / floor.put.ms.p50, 2),
      getRatio: round(worker.get.ms.p50 / floor.get.ms.p50, 2),
    },
    filesOverExec: {
      write: round(execWrite.ms.p50 / worker.put.ms.p50, 1),
      read: round(execRead.ms.p50 / worker.get.ms.p50, 1),
    },
  };
  for (const [label, t] of [["PUT through the worker", worker.put], ["GET through the worker", worker.get], ["PUT to sandboxd", floor.put], ["GET from sandboxd", floor.get], ["write through exec", execWrite], ["read through exec", execRead]]) {
    log(`${label}: ${t.mibPerSecond} MiB/s, ${t.secondsPer8MiB} s per 8 MiB`);
  }
  writeSection(out, { merge: Boolean(args.merge), key: "files", section });
  log(`wrote ${path.relative(ROOT, out)}`);
} finally {
  for (const f of cleanup.reverse()) await Promise.resolve(f()).catch(() => {});
}

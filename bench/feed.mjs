// How fast the room's live feed is: how soon a line a command prints
// reaches the watchers, with one watcher and with the room's 32, how soon
// a line a job prints reaches one watcher, and how soon a watcher that
// comes back after a full log (1 MiB) has caught up. Beside each figure its
// reference, measured in the same run:
//
// - a line's latency beside the floor, the same command read directly from
//   sandboxd's own stream (`POST /v1/sandboxes/{name}/exec/stream`), which
//   is what the Sandbox object reads: the difference is what the worker,
//   its log write and the WebSocket add. Each command prints its own time
//   stamps (`date +%s%N`, the machine's wall clock), one a line, and each
//   line is timed when the event carrying it arrives, on the same clock
//   (Date.now(), refined below the ms by performance.now(): see `wallMs`);
//   an output event may carry several lines, and every line counts;
// - a job's line (the same stamped command started by `POST .../jobs`,
//   timed as it arrives in `job_output` events), with one watcher, in runs
//   that alternate with that watcher's commands, so the two figures come
//   from the same minutes; its floor is the same job started in sandboxd
//   and its output stream (`GET /v1/sandboxes/{name}/jobs/{id}/output`)
//   read directly, which is what the object's follower reads;
// - a resume (`?since=` the number just before the oldest event kept, so
//   the whole log is replayed), to the last missed event, beside the same
//   1 MiB arriving live (command to command_end, on a watcher connected
//   while it printed; under it sandboxd's stream read directly, and the
//   exec's answer against that of the same exec where nobody watches,
//   whose output the log is given whole at its end) and a fresh join's
//   `hello` (the history and the terminal's last 64 KiB).
//
// The worker runs on workerd in a process of its own (lib/worker-process.mjs)
// and sandboxd in another; this process is the watchers. A line's floor
// runs in a sandbox of its own at the same moment as the worker's command,
// so that both see the same machine; the 1 MiB commands, which keep a core
// busy, run one after the other.
//
//   node bench/feed.mjs                   # writes bench/results/feed.json
//   node bench/feed.mjs --merge FILE.json # sets FILE's sections.feed
//   BENCH_QUICK=1 node bench/feed.mjs     # 1 run of 40 lines per watcher count, 3 resumes
//
// FEED_RUNS (commands per watcher count, 5), FEED_LINES (lines per command,
// 100), FEED_LINE_SLEEP (seconds between lines, 0.05), FEED_WATCHERS
// ("1,32") and FEED_RESUMES (1 MiB commands, resumes and fresh joins, 20)
// override the defaults.
import fs from "node:fs";
import path from "node:path";
import { parseArgs } from "node:util";

import { logged, OWN_FRAMES, watch } from "../tests/e2e/support/feed.mjs";
import { ROOT, startSandboxd, tempDir } from "../tests/e2e/support/stack.mjs";
import { bounded, postJson, round, stats } from "./lib/load.mjs";
import { progress, writeSection } from "./lib/results.mjs";
import { serveWorker } from "./lib/worker-process.mjs";

const { values: args } = parseArgs({ options: { merge: { type: "string" }, out: { type: "string" } } });
const QUICK = process.env.BENCH_QUICK === "1";
const RUNS = Number(process.env.FEED_RUNS ?? (QUICK ? 1 : 5));
const LINES = Number(process.env.FEED_LINES ?? (QUICK ? 40 : 100));
const LINE_SLEEP = process.env.FEED_LINE_SLEEP ?? "0.05";
const WATCHERS = (process.env.FEED_WATCHERS ?? "1,32").split(",").map(Number);
const RESUMES = Number(process.env.FEED_RESUMES ?? (QUICK ? 3 : 20));
const MIB = 1024 * 1024;
const STAMPS = `for i in $(seq 1 ${LINES}); do date +%s%N; sleep ${LINE_SLEEP}; done`;
// 64 output events of 16 KiB: with their command and end, a log's worth.
const PRINT_MIB = `head -c ${MIB} /dev/zero | tr '\\0' x`;
const RUN_LIMIT_MS = 30_000; // a bound on each wait of a run
const out = args.merge ?? args.out ?? path.join(ROOT, "bench/results/feed.json");
const cleanup = [];

const { log, loadavg, loadavgs } = progress("feed");
/**
 * The wall clock `date` reads, in ms, to a fraction of one. performance.now()
 * has the resolution, but it is a monotonic clock, which may run apart from
 * the wall clock (on this machine, by 1% when measured: 10 ms a second, so
 * performance.timeOrigin + performance.now() is seconds off within minutes);
 * so it only places a reading within the millisecond Date.now() gives.
 */
let wallOffset = Date.now() - performance.now();
function wallMs() {
  const now = performance.now(), wall = Date.now();
  wallOffset = Math.min(Math.max(wallOffset, wall - now), wall + 1 - now);
  return now + wallOffset;
}
const first = (type) => (events) => events.find((e) => e.type === type);

/** A watcher whose frames are timed (wall clock) and sized, index for index with its events. */
function timedWatch(base, room, options) {
  const watcher = watch(base, room, options);
  const times = [];
  const sizes = [];
  // This listener runs after feed.mjs's, which parses the frame.
  watcher.ws.addEventListener("message", (m) => {
    times.push(wallMs());
    sizes.push(Buffer.byteLength(m.data));
  });
  return { ...watcher, times, sizes };
}

async function leave(watchers) {
  for (const w of watchers) w.close();
  await Promise.all(watchers.map((w) => w.until(() => w.closed(), RUN_LIMIT_MS)));
}

/**
 * The latency of each of the LINES stamped lines among `pieces` ({data,
 * at}, in order) of `whose` output: a line is there when the piece that
 * completes it arrives.
 */
function lineLatencies(pieces, whose) {
  let pending = "";
  const lines = [];
  for (const { data, at } of pieces) {
    const done = (pending + data).split("\n");
    pending = done.pop();
    // Nanoseconds exceed a Number's exact integers; microseconds do not.
    for (const stamp of done) lines.push({ printedAt: Number(stamp.slice(0, -3)) / 1000, at });
  }
  if (pending) throw new Error(`${whose}: a line without its end: ${JSON.stringify(pending.slice(0, 40))}`);
  if (lines.length !== LINES) throw new Error(`${whose}: ${lines.length} lines of ${LINES}`);
  if (!lines.every((l, i) => i === 0 || l.printedAt > lines[i - 1].printedAt)) throw new Error(`${whose}: lines out of order`);
  return lines.map((l) => l.at - l.printedAt);
}

/** The events of sandboxd's NDJSON stream `res` (`start`, `output`, `end`): its output pieces, timed, and when its start and end lines came. */
async function timedStream(res, cmd) {
  if (!res.ok) throw new Error(`sandboxd answered ${res.status}: ${await res.text()}`);
  const pieces = [];
  let buffered = "", startAt, end, endAt;
  const decoder = new TextDecoder();
  for await (const chunk of res.body) {
    const at = wallMs();
    buffered += decoder.decode(chunk, { stream: true });
    const lines = buffered.split("\n");
    buffered = lines.pop();
    for (const line of lines) {
      const event = JSON.parse(line);
      if (event.type === "start") startAt = at;
      else if (event.type === "output") pieces.push({ data: event.data, at });
      else if (event.type === "end") [end, endAt] = [event, at];
    }
  }
  if (!end) throw new Error(`sandboxd's stream of ${JSON.stringify(cmd)} ended without its end`);
  return { pieces, startAt, end, endAt };
}

/** Runs `cmd` in sandboxd's sandbox `name` through its stream: its output pieces, timed, and when its start and end lines came. */
async function readSandboxd(base, name, cmd) {
  const res = await fetch(`${base}/v1/sandboxes/${name}/exec/stream`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ cmd }), signal: AbortSignal.timeout(RUN_LIMIT_MS) });
  return timedStream(res, cmd);
}

/** Starts `cmd` as job `id` in sandboxd's sandbox `name` and reads its output stream from its first byte, as the object's follower does: its output pieces, timed, and its end. */
async function readSandboxdJob(base, name, id, cmd) {
  await postJson(`${base}/v1/sandboxes/${name}/jobs`, { id, cmd, maxMs: RUN_LIMIT_MS });
  const res = await fetch(`${base}/v1/sandboxes/${name}/jobs/${id}/output?from=0`, { signal: AbortSignal.timeout(RUN_LIMIT_MS) });
  return timedStream(res, cmd);
}

/**
 * What `watcher` was sent of the command that started at or after its
 * event `from`: its output pieces, timed, its command and end events'
 * times, and the numbers and bytes of its frames. Throws unless those are
 * consecutive events of the log.
 */
function commandSeen(watcher, from) {
  const { events, times } = watcher;
  const start = events.findIndex((e, i) => i >= from && e.type === "command");
  const id = events[start]?.id;
  const end = events.findIndex((e, i) => i > start && e.type === "command_end" && e.id === id);
  if (start < 0 || end < 0) throw new Error(`no whole command among ${JSON.stringify(events.slice(from).map((e) => e.type))}`);
  const indices = [];
  for (let i = start; i <= end; i++) if (!OWN_FRAMES.has(events[i].type)) indices.push(i);
  const seqs = indices.map((i) => events[i].seq);
  if (!seqs.every((seq, k) => seq === seqs[0] + k)) throw new Error(`the command's events are not consecutive: ${JSON.stringify(seqs)}`);
  const pieces = indices.filter((i) => events[i].type === "output").map((i) => ({ data: events[i].data, at: times[i] }));
  const bytes = indices.reduce((n, i) => n + watcher.sizes[i], 0);
  return { pieces, startAt: times[start], end: events[end], endAt: times[end], seqs, bytes };
}

/** What `watcher` was sent of job `id` from its event `from` on: its output pieces, timed, and its end (the job). */
function jobSeen(watcher, from, id) {
  const { events, times } = watcher;
  const end = events.findIndex((e, i) => i >= from && e.type === "job_end" && e.job.id === id);
  if (end < 0) throw new Error(`no end of job ${id} among ${JSON.stringify(events.slice(from).map((e) => e.type))}`);
  const pieces = [];
  for (let i = from; i < end; i++) if (events[i].type === "job_output" && events[i].id === id) pieces.push({ data: events[i].data, at: times[i] });
  return { pieces, end: events[end].job };
}

/** Waits for a command_end at or after event `from[k]` on every watcher k (looked for from the newest: this runs on every frame). */
const untilEnded = (watchers, from) =>
  Promise.all(watchers.map((w, k) => w.until((events) => events.findLastIndex((e) => e.type === "command_end") >= from[k], RUN_LIMIT_MS)));

/**
 * The same stamped command through the worker to `count` watchers and read
 * from sandboxd directly, RUNS times; with one watcher, each run then does
 * the same as a job, through the worker and in sandboxd directly.
 */
async function lineLatency(w, sandboxd, count) {
  const room = `feed-lines-${count}-${Date.now()}`;
  const floorName = `sandbox-feed-floor-${count}-${Date.now()}`;
  const exec = (cmd) => postJson(`${w.url}/api/rooms/${room}/sandbox/exec`, { cmd });
  const watchers = Array.from({ length: count }, () => timedWatch(w.url, room));
  try {
    await Promise.all(watchers.map((x) => bounded(x.opened, RUN_LIMIT_MS, "the feed").then(() => x.until(first("hello"), RUN_LIMIT_MS))));
    // Both sandboxes' shells start before measuring; the exec may answer
    // before its events reach every watcher.
    await Promise.all([exec("true"), readSandboxd(sandboxd.url, floorName, "true")]);
    await untilEnded(watchers, watchers.map(() => 0));
    const viaWorker = [], direct = [], firstArrival = [], fanOut = [];
    const job = count === 1 && { viaWorker: [], direct: [], outputs: 0 };
    let outputs = 0;
    for (let run = 0; run < RUNS; run++) {
      const from = watchers.map((x) => x.events.length);
      const [floor] = await Promise.all([readSandboxd(sandboxd.url, floorName, STAMPS), exec(STAMPS)]);
      await untilEnded(watchers, from);
      const seen = watchers.map((x, k) => commandSeen(x, from[k]));
      const seqs = JSON.stringify(seen[0].seqs);
      if (seen.some((s) => JSON.stringify(s.seqs) !== seqs)) throw new Error(`run ${run}: the watchers were sent different events: ${[...new Set(seen.map((s) => JSON.stringify(s.seqs)))].join(" ")}`);
      const each = seen.map((s, k) => lineLatencies(s.pieces, `run ${run}, watcher ${k}`));
      viaWorker.push(...each.flat());
      // A line's first arrival over the watchers, and its spread from there to its last.
      if (count > 1) {
        for (let j = 0; j < LINES; j++) {
          const at = each.map((l) => l[j]);
          firstArrival.push(Math.min(...at));
          fanOut.push(Math.max(...at) - Math.min(...at));
        }
      }
      direct.push(...lineLatencies(floor.pieces, `run ${run}, sandboxd's stream`));
      outputs += seen[0].pieces.length;
      if (job) {
        const [watcher] = watchers, since = watcher.events.length;
        const [jobFloor, started] = await Promise.all([
          readSandboxdJob(sandboxd.url, floorName, `feed-floor-${run}-${Date.now()}`, STAMPS),
          postJson(`${w.url}/api/rooms/${room}/jobs`, { cmd: STAMPS }),
        ]);
        const { id } = JSON.parse(started).job;
        await watcher.until((events) => events.findLastIndex((e) => e.type === "job_end" && e.job.id === id) >= since, RUN_LIMIT_MS);
        const ran = jobSeen(watcher, since, id);
        for (const [whose, end] of [["the job", ran.end], ["sandboxd's job", jobFloor.end]]) {
          if (end.state !== "exited" || end.exitCode !== 0) throw new Error(`run ${run}: ${whose} ended ${end.state}, ${end.exitCode}`);
        }
        job.viaWorker.push(...lineLatencies(ran.pieces, `run ${run}, the job`));
        job.direct.push(...lineLatencies(jobFloor.pieces, `run ${run}, sandboxd's job stream`));
        job.outputs += ran.pieces.length;
      }
    }
    const closed = watchers.filter((x) => x.closed());
    if (closed.length) throw new Error(`${closed.length} watchers were let go: ${JSON.stringify(closed[0].closed())}`);
    const worker = stats(viaWorker), floor = stats(direct);
    return {
      watchers: count,
      commands: RUNS,
      outputEvents: outputs,
      linesPerOutputEvent: round((RUNS * LINES) / outputs, 2),
      worker,
      floor,
      added: { p50: round(worker.p50 - floor.p50), p99: round(worker.p99 - floor.p99) },
      ...(count > 1 && { firstWatcher: stats(firstArrival), fanOut: stats(fanOut) }),
      ...(job && { job: jobLatency(job) }),
    };
  } finally {
    await leave(watchers);
  }
}

/** A job's lines' figures, as a command's. */
function jobLatency({ viaWorker, direct, outputs }) {
  const worker = stats(viaWorker), floor = stats(direct);
  return { jobs: RUNS, outputEvents: outputs, linesPerOutputEvent: round((RUNS * LINES) / outputs, 2), worker, floor, added: { p50: round(worker.p50 - floor.p50), p99: round(worker.p99 - floor.p99) } };
}

/** Whether a watcher may resume after `since`: its first frame is a hello, not a gap. */
async function resumable(base, room, since) {
  const probe = watch(base, room, { since });
  try {
    return (await probe.until((events) => events[0], RUN_LIMIT_MS)).type === "hello";
  } finally {
    await leave([probe]);
  }
}

/** A watcher joining `room` (after `since`, if given): ms to its hello and, resuming, to the event `last`; what it got. */
async function join(base, room, since, last) {
  const t0 = wallMs();
  const watcher = timedWatch(base, room, since === undefined ? {} : { since });
  try {
    const hello = await watcher.until(first("hello"), RUN_LIMIT_MS);
    const helloAt = watcher.times[watcher.events.indexOf(hello)];
    const joined = { helloMs: helloAt - t0, helloBytes: watcher.sizes[watcher.events.indexOf(hello)], resumed: hello.resumed, recent: hello.recent.length };
    if (since === undefined) return joined;
    await watcher.until((events) => logged(events).at(-1)?.seq === last, RUN_LIMIT_MS);
    const missed = watcher.events.flatMap((e, i) => (OWN_FRAMES.has(e.type) ? [] : [{ seq: e.seq, at: watcher.times[i], bytes: watcher.sizes[i] }]));
    if (!missed.every((m, k) => m.seq === since + 1 + k)) throw new Error(`the resume sent ${JSON.stringify(missed.map((m) => m.seq))}, not ${since + 1} to ${last}`);
    return { ...joined, lastMs: missed.at(-1).at - t0, events: missed.length, bytes: missed.reduce((n, m) => n + m.bytes, 0) };
  } finally {
    await leave([watcher]);
  }
}

/**
 * Fills a room's log with 1 MiB commands, each timed as a watcher sees it
 * live and as sandboxd's stream gives it; then finds the oldest event the
 * log kept, and times resumes of the whole log and fresh joins, in turns.
 */
async function resume(w, sandboxd) {
  const room = `feed-resume-${Date.now()}`;
  const floorName = `sandbox-feed-resume-${Date.now()}`;
  const exec = async (inRoom, cmd) => {
    const t0 = performance.now();
    await postJson(`${w.url}/api/rooms/${inRoom}/sandbox/exec`, { cmd });
    return performance.now() - t0;
  };
  // The same command where nobody watches: sandboxd's plain /exec, the log
  // given the output whole at the end.
  const unwatched = `feed-unwatched-${Date.now()}`;
  const live = timedWatch(w.url, room);
  const liveRuns = [], directRuns = [], unwatchedRuns = [];
  let last;
  try {
    await bounded(live.opened, RUN_LIMIT_MS, "the feed");
    await live.until(first("hello"), RUN_LIMIT_MS);
    await Promise.all([exec(room, "true"), exec(unwatched, "true"), readSandboxd(sandboxd.url, floorName, "true")]);
    await untilEnded([live], [0]);
    for (let i = 0; i < RESUMES; i++) {
      const from = [live.events.length];
      const execMs = await exec(room, PRINT_MIB);
      await untilEnded([live], from);
      const seen = commandSeen(live, from[0]);
      const bytes = seen.pieces.reduce((n, p) => n + p.data.length, 0);
      if (bytes !== MIB || seen.end.truncated) throw new Error(`the feed carried ${bytes} bytes of ${MIB} (truncated: ${seen.end.truncated})`);
      liveRuns.push({ ms: seen.endAt - seen.startAt, execMs, events: seen.seqs.length, bytes: seen.bytes });
      const direct = await readSandboxd(sandboxd.url, floorName, PRINT_MIB);
      directRuns.push({ ms: direct.endAt - direct.startAt, events: direct.pieces.length });
      unwatchedRuns.push(await exec(unwatched, PRINT_MIB));
      last = seen.seqs.at(-1);
    }
    if (live.closed()) throw new Error(`the live watcher was let go: ${JSON.stringify(live.closed())}`);
  } finally {
    await leave([live]);
  }
  // The smallest number a watcher may resume after: the one before the oldest kept.
  let lo = 0, hi = last;
  while (lo < hi) {
    const mid = Math.floor((lo + hi) / 2);
    if (await resumable(w.url, room, mid)) hi = mid;
    else lo = mid + 1;
  }
  if (lo === 0) throw new Error("the log kept every event: it was not filled");
  const resumes = [], fresh = [];
  for (let i = 0; i < RESUMES; i++) {
    resumes.push(await join(w.url, room, lo, last));
    fresh.push(await join(w.url, room));
  }
  if (resumes.some((r) => !r.resumed) || fresh.some((f) => f.resumed)) throw new Error("a join was not what it asked for");
  // Every resume is sent the same log, and every fresh join the same hello;
  // sandboxd cuts each live command's output its own way.
  const one = (runs, key) => runs[0][key];
  const range = (runs, key) => [Math.min(...runs.map((r) => r[key])), Math.max(...runs.map((r) => r[key]))];
  return {
    log: { oldestKept: lo + 1, last, events: last - lo },
    resume: { toHello: stats(resumes.map((r) => r.helloMs)), toLastMissed: stats(resumes.map((r) => r.lastMs)), events: one(resumes, "events"), bytes: one(resumes, "bytes") },
    live: { commandToEnd: stats(liveRuns.map((r) => r.ms)), execAnswered: stats(liveRuns.map((r) => r.execMs)), events: range(liveRuns, "events"), bytes: range(liveRuns, "bytes") },
    unwatched: { execAnswered: stats(unwatchedRuns) },
    direct: { startToEnd: stats(directRuns.map((r) => r.ms)), outputEvents: range(directRuns, "events") },
    freshJoin: { toHello: stats(fresh.map((f) => f.helloMs)), helloBytes: one(fresh, "helloBytes"), recentEvents: one(fresh, "recent") },
  };
}

try {
  const sandboxd = await startSandboxd({ root: tempDir("bench-feed-sandboxes") });
  cleanup.push(async () => { await sandboxd.stop(); fs.rmSync(sandboxd.root, { recursive: true, force: true }); });
  const persistDir = tempDir("bench-feed");
  cleanup.push(() => fs.rmSync(persistDir, { recursive: true, force: true }));
  const w = await serveWorker({ vars: { SANDBOX_URL: sandboxd.url }, persistDir });
  cleanup.push(() => w.stop());
  const lines = {};
  for (const count of WATCHERS) {
    log(`${count} watchers: ${RUNS} commands of ${LINES} lines${count === 1 ? `, and as many jobs` : ""}`);
    loadavg(`${count} watchers`);
    const l = (lines[`watchers${count}`] = await lineLatency(w, sandboxd, count));
    log(`${count} watchers: p50 ${l.worker.p50} ms, p99 ${l.worker.p99} ms (floor ${l.floor.p50} / ${l.floor.p99}), n ${l.worker.n}`);
    if (l.job) log(`${count} watcher, a job's lines: p50 ${l.job.worker.p50} ms, p99 ${l.job.worker.p99} ms (floor ${l.job.floor.p50} / ${l.job.floor.p99}), n ${l.job.worker.n}`);
  }
  log(`resume: ${RESUMES} commands of 1 MiB, then ${RESUMES} resumes and fresh joins`);
  loadavg("resume");
  const resumed = await resume(w, sandboxd);
  log(`resume: ${resumed.resume.events} events, ${resumed.resume.bytes} B, p50 ${resumed.resume.toLastMissed.p50} ms (live ${resumed.live.commandToEnd.p50}, fresh hello ${resumed.freshJoin.toHello.p50})`);
  loadavg("end");
  const section = {
    date: new Date().toISOString(),
    quick: QUICK,
    settings: { runs: RUNS, lines: LINES, lineSleep: Number(LINE_SLEEP), watchers: WATCHERS, resumes: RESUMES, clock: "date +%s%N against Date.now(), refined below the ms by performance.now()" },
    load: loadavgs,
    lines,
    resume: resumed,
  };
  writeSection(out, { merge: Boolean(args.merge), key: "feed", section });
  log(`wrote ${path.relative(ROOT, out)}`);
} finally {
  for (const f of cleanup.reverse()) await Promise.resolve(f()).catch(() => {});
}

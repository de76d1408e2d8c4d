// How soon a key typed into the room's shared terminal comes back as its
// echo: one client types a single character at a time at bash's prompt and
// each is timed from the moment its `input` frame is sent to the moment the
// `output` frame holding its echo arrives, at the typing client and, with
// several clients connected, at every other one. Beside it, measured in the
// same run, the floor: the same keystrokes typed into a terminal of its own
// straight through sandboxd (`POST /v1/sandboxes/{name}/terminal/input`,
// the raw bytes) and their echo read from its output stream (`GET
// /v1/sandboxes/{name}/terminal/output?from=N`), which is what the Sandbox
// object writes and reads; the difference is what the worker and the
// WebSocket add.
//
// The worker runs on workerd in a process of its own (lib/worker-process.mjs),
// open (no token), and sandboxd in another; this process is every client,
// so that the typing and the arrivals are timed on one clock
// (performance.now()). The keys are the letters `a` to `p`, one each per
// line, typed ~20 ms after the last one's echo reached every client; after
// the sixteenth, Ctrl-U clears the line (bash's line would otherwise grow),
// and its redraw is let settle before the next key. Each keystroke through
// the worker is followed, or preceded (they take turns), by one through
// sandboxd directly, so that both see the same machine.
//
//   node bench/terminal.mjs                   # writes bench/results/terminal.json
//   node bench/terminal.mjs --merge FILE.json # sets FILE's sections.terminal
//   BENCH_QUICK=1 node bench/terminal.mjs     # 40 and 20 keystrokes
//
// TERM_CLIENTS ("1,32"), TERM_KEYS ("200,100": keystrokes per client count)
// and TERM_GAP_MS (20) override the defaults.
import fs from "node:fs";
import path from "node:path";
import { parseArgs } from "node:util";

import { ROOT, startSandboxd, tempDir } from "../tests/e2e/support/stack.mjs";
import { bounded, round, stats } from "./lib/load.mjs";
import { progress, writeSection } from "./lib/results.mjs";
import { serveWorker } from "./lib/worker-process.mjs";

const { values: args } = parseArgs({ options: { merge: { type: "string" }, out: { type: "string" } } });
const QUICK = process.env.BENCH_QUICK === "1";
const CLIENTS = (process.env.TERM_CLIENTS ?? "1,32").split(",").map(Number);
const KEYS = (process.env.TERM_KEYS ?? (QUICK ? "40,20" : "200,100")).split(",").map(Number);
const GAP_MS = Number(process.env.TERM_GAP_MS ?? 20);
const LINE = "abcdefghijklmnop"; // the keys of one line, each once
const CTRL_U = "\u0015";
const SETTLE_MS = 150; // after Ctrl-U, for its redraw to arrive everywhere
const WAIT_MS = 10_000; // a bound on each wait
const PROTOCOL = "duet.term.v1";
const out = args.merge ?? args.out ?? path.join(ROOT, "bench/results/terminal.json");
const cleanup = [];

const { log, loadavg, loadavgs } = progress("terminal");
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** What a reader got, as timed pieces of output, with a way to wait for a piece. */
function receiver() {
  const pieces = [];
  const waiters = new Set();
  return {
    pieces,
    add(data) {
      pieces.push({ data, at: performance.now() });
      for (const w of [...waiters]) w();
    },
    wake: () => { for (const w of [...waiters]) w(); },
    /** The time the first piece from index `from` holding `text` arrived, within WAIT_MS. */
    arrival(from, text, what) {
      return bounded(new Promise((resolve) => {
        const test = () => {
          for (let i = from; i < pieces.length; i++) {
            if (pieces[i].data.includes(text)) {
              waiters.delete(test);
              return resolve(pieces[i].at);
            }
          }
        };
        waiters.add(test);
        test();
      }), WAIT_MS, `${what}: the echo of ${JSON.stringify(text)}`);
    },
  };
}

/** A client of the room's terminal through the worker: its output, timed. */
function client(base, room) {
  const ws = new WebSocket(`${base.replace(/^http/, "ws")}/api/rooms/${room}/terminal`, [PROTOCOL]);
  const got = receiver();
  let screen = null, closed = null;
  ws.addEventListener("message", (m) => {
    const frame = JSON.parse(m.data);
    if (frame.type === "screen") { screen ??= frame; got.wake(); }
    else if (frame.type === "output") got.add(frame.data);
  });
  ws.addEventListener("close", (e) => { closed = { code: e.code, reason: e.reason }; got.wake(); });
  const opened = new Promise((resolve, reject) => {
    ws.addEventListener("open", () => resolve(ws.protocol));
    ws.addEventListener("error", () => reject(new Error("the terminal's socket failed")));
  });
  return {
    got,
    opened,
    screen: () => screen,
    closed: () => closed,
    type: (data) => ws.send(JSON.stringify({ type: "input", data })),
    close: () => ws.close(),
  };
}

/** sandboxd's terminal `name`, read and typed into directly: its output, timed. */
async function direct(base, name) {
  const url = `${base}/v1/sandboxes/${name}/terminal`;
  const res0 = await fetch(url, { signal: AbortSignal.timeout(WAIT_MS) });
  if (!res0.ok) throw new Error(`GET ${url}: ${res0.status} ${await res0.text()}`);
  const { offset } = await res0.json();
  const abort = new AbortController();
  const res = await fetch(`${url}/output?from=${offset}`, { signal: abort.signal });
  if (!res.ok) throw new Error(`sandboxd's terminal output answered ${res.status}`);
  const got = receiver();
  (async () => {
    let buffered = "";
    const decoder = new TextDecoder();
    for await (const chunk of res.body) {
      buffered += decoder.decode(chunk, { stream: true });
      const lines = buffered.split("\n");
      buffered = lines.pop();
      for (const line of lines) {
        const event = JSON.parse(line);
        if (event.type === "output") got.add(event.data);
      }
    }
  })().catch(() => {}); // ends when aborted
  return {
    got,
    async type(data) {
      // Not awaited by the caller: the echo may come before the answer.
      const r = await fetch(`${url}/input`, { method: "POST", headers: { "content-type": "application/octet-stream" }, body: data, signal: AbortSignal.timeout(WAIT_MS) });
      if (!r.ok) throw new Error(`POST ${url}/input: ${r.status} ${await r.text()}`);
      await r.arrayBuffer();
    },
    close: () => abort.abort(),
  };
}

/** Types `key` with `type` and waits for its echo at every receiver in `gots`: ms to each. */
async function keystroke(type, gots, key, what) {
  const from = gots.map((g) => g.pieces.length);
  const t0 = performance.now();
  const typed = type(key);
  const at = await Promise.all(gots.map((g, k) => g.arrival(from[k], key, `${what}, client ${k}`)));
  await typed;
  return at.map((x) => x - t0);
}

/** Waits for `ready-42` at every receiver, after typing the command that prints it, then lets the prompt settle. */
async function ready(type, gots, what) {
  const from = gots.map((g) => g.pieces.length);
  await type(`${CTRL_U}echo ready-$((6*7))\r`);
  await Promise.all(gots.map((g, k) => g.arrival(from[k], "ready-42", `${what}, client ${k}`)));
  await sleep(500);
}

/**
 * `keys` keystrokes into one room's terminal with `count` clients connected,
 * each beside one into sandboxd's terminal `floorName` directly.
 */
async function typeAway(w, floor, count, keys) {
  const room = `term-${count}-${Date.now()}`;
  const clients = Array.from({ length: count }, () => client(w.url, room));
  try {
    await Promise.all(clients.map((c) => bounded(c.opened, WAIT_MS, "the terminal's socket")));
    const gots = clients.map((c) => c.got);
    const viaWorker = (key) => Promise.resolve(clients[0].type(key));
    await ready(viaWorker, gots, "the room's terminal");
    if (clients.some((c) => !c.screen())) throw new Error("a client had no screen first");
    const typing = [], slowestOther = [], floorMs = [];
    let sinceClear = 0;
    for (let i = 0; i < keys; i++) {
      const key = LINE[sinceClear];
      const worker = () => keystroke(viaWorker, gots, key, `keystroke ${i}`);
      const floorKey = () => keystroke(floor.type, [floor.got], key, `keystroke ${i} (sandboxd)`);
      let ms, f;
      if (i % 2 === 0) { ms = await worker(); await sleep(GAP_MS); [f] = await floorKey(); }
      else { [f] = await floorKey(); await sleep(GAP_MS); ms = await worker(); }
      typing.push(ms[0]);
      if (count > 1) slowestOther.push(Math.max(...ms.slice(1)));
      floorMs.push(f);
      await sleep(GAP_MS);
      if (++sinceClear === LINE.length) {
        sinceClear = 0;
        clients[0].type(CTRL_U);
        await floor.type(CTRL_U);
        await sleep(SETTLE_MS);
      }
    }
    clients[0].type(CTRL_U);
    const gone = clients.filter((c) => c.closed());
    if (gone.length) throw new Error(`${gone.length} clients were closed: ${JSON.stringify(gone[0].closed())}`);
    const t = stats(typing), fl = stats(floorMs);
    const added = (s) => ({ p50: round(s.p50 - fl.p50), p99: round(s.p99 - fl.p99) });
    return {
      clients: count,
      keystrokes: keys,
      floor: fl,
      typing: t,
      typingAdded: added(t),
      ...(count > 1 && { slowestOther: stats(slowestOther), slowestOtherAdded: added(stats(slowestOther)) }),
    };
  } finally {
    for (const c of clients) c.close();
  }
}

try {
  if (KEYS.length !== CLIENTS.length) throw new Error(`TERM_KEYS (${KEYS}) needs one count per TERM_CLIENTS (${CLIENTS})`);
  const sandboxd = await startSandboxd({ root: tempDir("bench-terminal-sandboxes") });
  cleanup.push(async () => { await sandboxd.stop(); fs.rmSync(sandboxd.root, { recursive: true, force: true }); });
  const persistDir = tempDir("bench-terminal");
  cleanup.push(() => fs.rmSync(persistDir, { recursive: true, force: true }));
  const w = await serveWorker({ vars: { SANDBOX_URL: sandboxd.url }, persistDir });
  cleanup.push(() => w.stop());
  const floor = await direct(sandboxd.url, `sandbox-term-floor-${Date.now()}`);
  cleanup.push(() => floor.close());
  await ready(floor.type, [floor.got], "sandboxd's terminal");
  const counts = {};
  for (const [k, count] of CLIENTS.entries()) {
    log(`${count} clients: ${KEYS[k]} keystrokes, each beside one through sandboxd directly`);
    loadavg(`${count} clients`);
    const c = (counts[`clients${count}`] = await typeAway(w, floor, count, KEYS[k]));
    log(`${count} clients: typing client p50 ${c.typing.p50} ms, p99 ${c.typing.p99} ms${c.slowestOther ? `; slowest other p50 ${c.slowestOther.p50}, p99 ${c.slowestOther.p99}` : ""} (floor ${c.floor.p50} / ${c.floor.p99})`);
  }
  loadavg("end");
  const section = {
    date: new Date().toISOString(),
    quick: QUICK,
    settings: { clients: CLIENTS, keystrokes: KEYS, gapMs: GAP_MS, keysPerLine: LINE.length, settleMs: SETTLE_MS, clock: "performance.now(), one process" },
    load: loadavgs,
    counts,
  };
  writeSection(out, { merge: Boolean(args.merge), key: "terminal", section });
  log(`wrote ${path.relative(ROOT, out)}`);
} finally {
  for (const f of cleanup.reverse()) await Promise.resolve(f()).catch(() => {});
}

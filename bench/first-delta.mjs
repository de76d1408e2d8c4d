// How soon a watcher sees an answer begin, against how long the whole answer
// takes: with the Workers AI stand-in streaming at a fixed pace, the time
// from sending POST /message to the first `delta` on a watcher's live feed,
// and to the /message response (the full reply). Beside each, its floor:
// the same stand-in read directly, with the very request the worker sends
// it (its time to its first piece and to the end of its stream).
//
// The worker runs on workerd in a process of its own (lib/worker-process.mjs,
// which also holds the stand-in); this process is the client. Every run is
// a fresh room with one watcher; the direct read starts at the same moment
// as the /message, so that both see the same machine.
//
//   node bench/first-delta.mjs                   # writes bench/results/first-delta.json
//   node bench/first-delta.mjs --merge FILE.json # sets FILE's sections.firstDelta
//   BENCH_QUICK=1 node bench/first-delta.mjs     # 3 runs per length instead of 20
//
// FIRST_DELTA_RUNS, FIRST_DELTA_TOKEN_MS (the stand-in's pace, 20 ms a
// piece) and FIRST_DELTA_WORDS (answer lengths, "40,150") override the
// defaults. Needs no sandboxd: these answers run no command.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";

import { pieces } from "../tests/e2e/support/ai-standin.mjs";
import { watch } from "../tests/e2e/support/feed.mjs";
import { ROOT, tempDir } from "../tests/e2e/support/stack.mjs";
import { bounded, postJson, round, stats } from "./lib/load.mjs";
import { writeSection } from "./lib/results.mjs";
import { serveWorker } from "./lib/worker-process.mjs";

const { values: args } = parseArgs({ options: { merge: { type: "string" }, out: { type: "string" } } });
const QUICK = process.env.BENCH_QUICK === "1";
const RUNS = Number(process.env.FIRST_DELTA_RUNS ?? (QUICK ? 3 : 20));
const TOKEN_MS = Number(process.env.FIRST_DELTA_TOKEN_MS ?? 20);
const WORDS = (process.env.FIRST_DELTA_WORDS ?? "40,150").split(",").map(Number);
// What the workers-binding's requests carry (see ai-standin.mjs).
const BINDING_URL = "https://workers-binding.ai/run?version=3";
const RUN_LIMIT_MS = 30_000; // a bound on each wait of a run
const out = args.merge ?? args.out ?? path.join(ROOT, "bench/results/first-delta.json");
const loadavgs = [];
const cleanup = [];

function log(...a) {
  console.error(`[first-delta ${(performance.now() / 1000).toFixed(1)}s]`, ...a);
}
function loadavg(label) {
  loadavgs.push({ label, at: new Date().toISOString(), loadavg: os.loadavg().map((x) => round(x, 2)) });
}
const wordsOf = (n) => Array.from({ length: n }, (_, i) => `word${i + 1}`).join(" ");

/**
 * Reads the stand-in directly with the worker's own request `asked` (as the
 * binding sends it, through Miniflare's remote proxy): ms from sending to
 * its first and last pieces of text and to the end of its stream.
 */
async function readStandin(aiUrl, asked) {
  const headers = { "content-type": "application/json", "mf-url": BINDING_URL, "mf-header-cf-consn-model-id": asked.model };
  if (asked.session) headers["mf-header-x-session-affinity"] = asked.session;
  const t0 = performance.now();
  const res = await fetch(aiUrl, { method: "POST", headers, body: JSON.stringify({ inputs: asked.inputs, options: asked.options }), signal: AbortSignal.timeout(RUN_LIMIT_MS) });
  if (!res.ok) throw new Error(`the stand-in answered ${res.status}: ${await res.text()}`);
  let text = "", buffered = "", firstPiece, lastPiece;
  const decoder = new TextDecoder();
  for await (const chunk of res.body) {
    buffered += decoder.decode(chunk, { stream: true });
    const events = buffered.split("\n\n");
    buffered = events.pop();
    for (const event of events) {
      const data = event.replace(/^data: /, "");
      if (data === "[DONE]") continue;
      const parsed = JSON.parse(data);
      // A chat model's `delta.content`, a {response} model's `response`.
      const piece = parsed.choices?.[0]?.delta?.content || parsed.response || "";
      if (!piece) continue;
      const at = performance.now() - t0;
      firstPiece ??= at;
      lastPiece = at;
      text += piece;
    }
  }
  return { text, firstPieceMs: firstPiece, lastPieceMs: lastPiece, endMs: performance.now() - t0 };
}

/** One /message to a fresh watched room: ms to the first delta on the feed, to the agent's message there, and to the response. */
async function viaWorker(base, room, text, watcher, times) {
  const t0 = performance.now();
  const body = JSON.parse(await postJson(`${base}/api/rooms/${room}/message`, { text }));
  const replyMs = performance.now() - t0;
  const isAgent = (e) => e.type === "message" && e.message.role === "agent";
  await watcher.until((events) => events.some(isAgent), RUN_LIMIT_MS);
  const { events } = watcher;
  const deltas = events.filter((e) => e.type === "delta");
  return {
    reply: body.reply,
    shown: deltas.map((e) => e.text).join(""),
    firstDeltaMs: deltas.length ? times[events.indexOf(deltas[0])] - t0 : NaN,
    feedMessageMs: times[events.findIndex(isAgent)] - t0,
    replyMs,
  };
}

async function measure(w, words) {
  const text = `long ${words}`;
  const expected = wordsOf(words);
  const runs = [];
  // A first exchange warms the path and gives the request the worker sends
  // the stand-in for this text, which the direct reads repeat.
  await postJson(`${w.url}/api/rooms/first-delta-warm-${words}-${Date.now()}/message`, { text });
  const asked = await w.lastAiRequest();
  if (!asked?.inputs?.stream) throw new Error(`the worker did not ask for a stream: ${JSON.stringify(asked).slice(0, 200)}`);
  for (let i = 0; i < RUNS; i++) {
    const room = `first-delta-${words}-${i}-${Date.now()}`;
    const watcher = watch(w.url, room);
    // Arrival times of the watcher's events, index for index (this listener runs after feed.mjs's).
    const times = [];
    watcher.ws.addEventListener("message", () => times.push(performance.now()));
    try {
      await bounded(watcher.opened, RUN_LIMIT_MS, "the feed");
      await watcher.until((events) => events.some((e) => e.type === "hello"), RUN_LIMIT_MS);
      const [worker, direct] = await Promise.all([viaWorker(w.url, room, text, watcher, times), readStandin(w.aiUrl, asked)]);
      if (worker.reply !== expected || worker.shown !== expected) throw new Error(`run ${i}: the worker answered ${JSON.stringify(worker.reply.slice(0, 80))}, the feed showed ${JSON.stringify(worker.shown.slice(0, 80))}`);
      if (direct.text !== expected) throw new Error(`run ${i}: the stand-in streamed ${JSON.stringify(direct.text.slice(0, 80))}`);
      runs.push({ ...worker, ...direct });
    } finally {
      watcher.close();
    }
  }
  const of = (key) => stats(runs.map((r) => r[key]));
  const added = (key, floor) => stats(runs.map((r) => r[key] - r[floor]));
  return {
    words,
    pieces: pieces(expected).length,
    chars: expected.length,
    worker: { firstDelta: of("firstDeltaMs"), feedMessage: of("feedMessageMs"), reply: of("replyMs") },
    standin: { firstPiece: of("firstPieceMs"), lastPiece: of("lastPieceMs"), end: of("endMs") },
    // Run by run: the worker's figure less the direct read's beside it.
    added: { firstDelta: added("firstDeltaMs", "firstPieceMs"), reply: added("replyMs", "endMs") },
    runs: runs.map((r) => Object.fromEntries(["firstDeltaMs", "feedMessageMs", "replyMs", "firstPieceMs", "lastPieceMs", "endMs"].map((k) => [k, round(r[k], 2)]))),
  };
}

try {
  const persistDir = tempDir("bench-first-delta");
  cleanup.push(() => fs.rmSync(persistDir, { recursive: true, force: true }));
  const w = await serveWorker({ persistDir, standin: { tokenMs: TOKEN_MS } });
  cleanup.push(() => w.stop());
  const lengths = {};
  for (const words of WORDS) {
    log(`long ${words}: ${RUNS} runs at ${TOKEN_MS} ms a piece`);
    loadavg(`long ${words}`);
    lengths[`words${words}`] = await measure(w, words);
    const l = lengths[`words${words}`];
    log(`long ${words}: first delta p50 ${l.worker.firstDelta.p50} ms (stand-in's first piece ${l.standin.firstPiece.p50}), reply p50 ${l.worker.reply.p50} ms (stand-in's end ${l.standin.end.p50})`);
  }
  loadavg("end");
  const section = { date: new Date().toISOString(), quick: QUICK, settings: { runs: RUNS, tokenMs: TOKEN_MS, words: WORDS }, load: loadavgs, lengths };
  writeSection(out, { merge: Boolean(args.merge), key: "firstDelta", section });
  log(`wrote ${path.relative(ROOT, out)}`);
} finally {
  for (const f of cleanup.reverse()) await Promise.resolve(f()).catch(() => {});
}

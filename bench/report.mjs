// Turns bench/results/latest.json (and size-experiments.json when present)
// into docs/benchmarks.md and docs/benchmarks.svg.
//
//   node bench/report.mjs [RESULTS.json [OUT_DIR]]
//
// reads another results file, and writes benchmarks.md and benchmarks.svg
// into another directory (default docs/), e.g. to try the report on a copy.
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const resultsFile = path.resolve(process.argv[2] ?? path.join(ROOT, "bench/results/latest.json"));
const outDir = path.resolve(process.argv[3] ?? path.join(ROOT, "docs"));
const r = JSON.parse(fs.readFileSync(resultsFile, "utf8"));
const sxFile = path.join(ROOT, "bench/results/size-experiments.json");
const sx = fs.existsSync(sxFile) ? JSON.parse(fs.readFileSync(sxFile, "utf8")) : null;
const { floors, sandboxd: sd, coldStart, worker, upload, compare, access, firstDelta, feed, terminal, mcp } = r.sections;
const d = r.derived;

const ms = (x) => (x == null ? "–" : x < 10 ? x.toFixed(2) : x < 100 ? x.toFixed(1) : x.toFixed(0));
const kib = (b) => `${(b / 1024).toFixed(1)} KiB`;
const bytes = (b) => `${b.toLocaleString("en-US")} B (${kib(b)})`;
const LEVELS = ["c1", "c8", "c32"];
const lines = [];
const p = (...a) => lines.push(...a);
const loads = [...r.load, ...(compare?.load ?? []), ...(firstDelta?.load ?? []), ...(feed?.load ?? []), ...(terminal?.load ?? []), ...(mcp?.load ?? [])].map((l) => l.loadavg[0]);

// ---- targets
const TARGET_GZIP = upload?.budget ?? 216 * 1024;
const targets = [
  {
    what: `Gzipped upload ≤ ${TARGET_GZIP / 1024} KiB (the CI budget; 200 KiB until each room became an MCP server)`,
    value: upload ? kib(upload.gzip) : "not measured",
    met: upload ? upload.gzip <= TARGET_GZIP : null,
    why: upload
      ? upload.gzip <= TARGET_GZIP
        ? `${kib(TARGET_GZIP - upload.gzip)} below it; the wasm is ${kib(upload.files["index_bg.wasm"]?.gzip ?? 0)} of it gzipped alone (the size experiments below show what each build setting changes).`
        : `${kib(upload.gzip - TARGET_GZIP)} above it.`
      : "",
  },
  {
    what: "sandboxd's added cost for `true` ≤ 2× fork+exec of /bin/true (p50)",
    value: `${ms(d.sandboxdAddedForTrueP50)} ms added vs ${ms(d.forkExecP50)} ms fork+exec (${d.sandboxdAddedVsForkExec}×)`,
    met: d.sandboxdAddedVsForkExec <= 2,
    why: `sandboxd's \`true\` p50 is ${ms(d.sandboxdTrueP50)} ms end to end, of which ${ms(floors.http.c1.p50)} ms is the loopback HTTP round trip; \`true\` is a bash builtin, so no process starts: the cost is one write to bash's stdin and reading the marker lines back (${d.sandboxdTotalVsForkExec}× fork+exec even counting HTTP). An external command (\`/bin/true\`) costs ${ms(sd.binTrue.p50)} ms p50, i.e. about one fork+exec more.`,
  },
  {
    what: "What the worker adds to /sandbox/exec on top of sandboxd ≤ 5 ms (p50, loopback)",
    value: `${ms(d.workerAddsToExecP50)} ms (worker ${ms(worker.exec.c1.p50)} ms − sandboxd ${ms(d.sandboxdTrueP50)} ms)`,
    met: d.workerAddsToExecP50 <= 5,
    why:
      d.workerAddsToExecP50 <= 5
        ? `at concurrency 1; the path is front worker → Sandbox Durable Object → fetch to sandboxd, plus one JSON log line per request. Under concurrency the Durable Objects and workerd share the same two cores as sandboxd and the client, so the gap grows (p99 gap ${ms(d.workerAddsToExecP99)} ms).`
        : `at concurrency 1 the front worker → Sandbox Durable Object → fetch path costs more than 5 ms here; on a loaded 2-core machine workerd, sandboxd and the client compete for the CPU (p99 gap ${ms(d.workerAddsToExecP99)} ms).`,
  },
];
const message = compare?.endpoints.message;
if (message) {
  const r = message.ratio;
  targets.push(
    {
      what: `Warm POST /message throughput ≥ 1.2× the JavaScript reference (wrk, ${compare.settings.connections} connections)`,
      value: `${r.throughput.toFixed(2)}× (${message.rust.requestsPerSec.toFixed(0)} against ${message.js.requestsPerSec.toFixed(0)} req/s; CPU per request ${r.cpu == null ? "–" : `${r.cpu.toFixed(2)}×`})`,
      met: r.throughput >= 1.2,
      why: "both do the same work, the room's log included (the reference writes the same rows, which bench/compare.test.mjs checks); what is left is the JS↔wasm boundary: the generated glue and shim, and a crossing for each runtime call (see \"The warm path against JavaScript\" below).",
    },
    {
      what: "… with p99 no worse than the reference's",
      value: `${r.p99.toFixed(2)}× (${ms(message.rust.p99Ms)} against ${ms(message.js.p99Ms)} ms)`,
      met: r.p99 <= 1,
      why: "p99 here is set by the 2-core machine's scheduling more than by either worker: it moves by tens of per cent between rounds of the same worker.",
    },
  );
}
// The same work, like for like: CPU per request within 1.1× of the reference's.
const CPU_MAX = 1.1;
for (const [key, label] of [["message", "POST /message"], ["exec", "POST /sandbox/exec `true`"]]) {
  const e = compare?.endpoints[key];
  if (!e?.ratio.cpu) continue;
  targets.push({
    what: `Warm ${label}: CPU per request ≤ ${CPU_MAX}× the JavaScript reference's, which does the same work`,
    value: `${e.ratio.cpu.toFixed(2)}× (${e.rust.cpuUsPerRequest.toFixed(0)} against ${e.js.cpuUsPerRequest.toFixed(0)} µs; per round ${e.ratio.perRound.map((x) => x.cpu.toFixed(2)).join(", ")})`,
    met: e.ratio.cpu <= CPU_MAX,
    why: "our own crate is about 3% of the isolate's busy time; the JS↔wasm glue, the generated shim and the crossings for each runtime call are the rest of the gap (see \"The warm path against JavaScript\" below).",
  });
}
// What a room token may cost a warm request against the service token.
const ACCESS_CPU_MAX = 1.05;
const accessHistory = access?.endpoints.history;
if (accessHistory) {
  const r = accessHistory.ratio;
  targets.push({
    what: `A room token costs a warm GET /messages at most ${Math.round((ACCESS_CPU_MAX - 1) * 100)}% more CPU than the service token`,
    value: `${r.cpu == null ? "–" : `${r.cpu.toFixed(2)}×`} CPU per request (${accessHistory.room.cpuUsPerRequest?.toFixed(0)} against ${accessHistory.service.cpuUsPerRequest?.toFixed(0)} µs), throughput ${r.throughput.toFixed(2)}×`,
    met: r.cpu != null && r.cpu <= ACCESS_CPU_MAX,
    why: "the lightest request with a room hop, so the check weighs most here; the HMAC is paid once per token and isolate, the rest is reading a longer token in the front door and in the object (see \"Room tokens on the warm path\" below).",
  });
}
const refStart = coldStart.reference?.median;
if (refStart) {
  targets.push({
    what: "Cold start well ahead of the TypeScript worker's (process start → first 200 on /health; it took 1.0–1.4 s)",
    value: `${ms(coldStart.median.toFirstHealthMs)} ms (the JavaScript reference: ${ms(refStart.toFirstHealthMs)} ms)`,
    met: coldStart.median.toFirstHealthMs < 1000,
    why: `the TypeScript worker's figure was measured on an earlier Miniflare and is not in this repository, so it is not re-measured here; the JavaScript reference, one small module with no dependencies, starts ${coldStart.median.toFirstHealthMs > refStart.toFirstHealthMs ? `${ms(coldStart.median.toFirstHealthMs - refStart.toFirstHealthMs)} ms sooner than the Rust worker (whose wasm is compiled at start)` : "no sooner than the Rust worker"}; most of either figure is Miniflare's own set-up.`,
  });
}

p("# Benchmarks", "");
p(`Measured ${r.date.slice(0, 10)} (${r.date.slice(11, 16)} UTC) with one command:`, "", "```sh", "bash bench/run", "```", "");
p("It builds the worker and sandboxd when they are missing, measures everything below on this machine and writes `bench/results/latest.json`, this page and `docs/benchmarks.svg`. Size experiments (slow: they rebuild the crate several times in a temporary copy) are a separate command, `bash bench/size-experiments`, writing `bench/results/size-experiments.json`, which this page includes when present. The CI size check is `bash scripts/size-budget`.", "");
if (r.quick) p("**This was a quick run (`BENCH_QUICK=1`): a tenth of the requests. Do not quote these figures.**", "");

p("## Machine", "");
p("| | |", "|---|---|");
const m = r.machine;
p(`| CPUs (nproc) | ${m.nproc} |`, `| CPU | ${m.cpuModel} |`, `| memory | ${m.memoryGiB} GiB |`, `| OS | ${m.os}, Linux ${m.kernel} |`, `| rustc | ${m.rustc} |`, `| node | ${m.node} |`, `| workerd | ${m.workerd} (miniflare ${m.miniflare}, wrangler ${m.wrangler}) |`);
p(`| load during the run | 1-minute load average ${Math.min(...loads).toFixed(2)}–${Math.max(...loads).toFixed(2)} on ${m.nproc} CPUs (other work was running; see \`load\` in latest.json) |`, "");
p("The client, workerd, sandboxd and the floor servers all run on the same machine and talk over 127.0.0.1, so every figure includes competing for the same cores; absolute numbers are for comparing runs on one machine, not for predicting Cloudflare's edge.", "");

p("## Targets", "");
p("| target | measured | status | why |", "|---|---|---|---|");
for (const t of targets) p(`| ${t.what} | ${t.value} | ${t.met == null ? "–" : t.met ? "**met**" : "**not met**"} | ${t.why} |`);
p("");

p("## Upload size", "");
if (upload) {
  p(`What \`wrangler deploy\` would upload (${upload.source === "wrangler" ? "`wrangler deploy --dry-run --outdir` with a temporary wrangler.toml without `[build]`, `[[containers]]` and `[assets]`" : "**measured from build/ directly; wrangler could not run**"}), gzipped as wrangler gzips it (all modules in one stream):`, "");
  p("| | raw | gzip |", "|---|---:|---:|");
  for (const [name, s] of Object.entries(upload.files)) p(`| ${name} | ${bytes(s.raw)} | ${bytes(s.gzip)} (alone) |`);
  p(`| **total upload** | **${bytes(upload.raw)}** | **${bytes(upload.gzip)}** |`, "");
  p(`Budget (\`scripts/size-budget\`, fails above it): ${TARGET_GZIP / 1024} KiB = ${TARGET_GZIP.toLocaleString("en")} B gzipped (the TypeScript worker uploads 399 KiB; the budget was 200 KiB until each room became an MCP server, which costs 13.5 KiB of the upload) — ${upload.withinBudget ? "within" : "**exceeded**"}. Target 120 KiB — ${upload.targetMet ? "met" : "not met"} (see below for what it would take).${upload.wrangler ? ` wrangler's own line: \`Total Upload: ${upload.wrangler}\`.` : ""}`, "");
  p("`index.js` here is wrangler's re-bundle of build/index.js (not minified, hence larger than build/index.js); its source map is written beside it but not uploaded.", "");
  if (upload.assets?.files) p(`The web page's ${upload.assets.files} files (\`build/page/\`, written by \`scripts/page.mjs\`, ${bytes(upload.assets.raw)} raw, ${bytes(upload.assets.gzip)} gzipped one by one) go to the platform's asset store, uploaded apart from the Worker and not counted here; the Worker reads them through its \`ASSETS\` binding.`, "");
}

p("## Cold start", "");
p(`A new Miniflare instance (a fresh workerd process, with the built worker, SQLite-backed Durable Objects and the scripted AI stand-in) per run; median of ${coldStart.runs.length} runs. Time is measured from \`new Miniflare\` in Node, so it includes Miniflare's own set-up as well as workerd's start and the wasm compile.`, "");
const cs = coldStart.median;
const ref = coldStart.reference?.median;
if (ref) p("Each run of the Rust worker is followed by one of the JavaScript reference (`bench/reference/`, served the same way).", "");
p(`| | median | runs |${ref ? " JavaScript reference (median) |" : ""}`, `|---|---:|---|${ref ? "---:|" : ""}`);
const runsOf = (k) => coldStart.runs.map((x) => ms(x[k])).join(", ");
const row = (label, k) => p(`| ${label} | ${ms(cs[k])} ms | ${runsOf(k)} |${ref ? ` ${ms(ref[k])} ms |` : ""}`);
row("process start → Miniflare ready", "toReadyMs");
row("process start → first 200 on /health", "toFirstHealthMs");
row("first /message of a new room (new DuetAgent object, scripted model)", "firstMessageMs");
row("second /message of that room (warm)", "secondMessageMs");
row("first /sandbox/exec of that room (new Sandbox object, new bash in sandboxd)", "firstExecNewSandboxMs");
p("");

p("## Latency and throughput on workerd", "");
p("Closed loop: N clients each send the next request as soon as the previous answer is read (Node's fetch, keep-alive connections). Milliseconds. `/message` uses one room per client, each filled to the 20-message history window before measuring, so every request stores and returns a full window; the model is the scripted stand-in (answers at once, no `<run>` tags). `/sandbox/exec` runs `true`, one room (and so one Sandbox object and one bash) per client.", "");
const latRow = (label, c, s) => `| ${label} | ${c.slice(1)} | ${ms(s.p50)} | ${ms(s.p95)} | ${ms(s.p99)} | ${s.throughput.toFixed(0)} | ${s.completed}${s.errors ? ` (**${s.errors} errors**)` : ""} |`;
p("| endpoint | concurrency | p50 | p95 | p99 | req/s | requests |", "|---|---:|---:|---:|---:|---:|---:|");
for (const [key, label] of [["health", "GET /health"], ["history", "GET /messages (empty room)"], ["message", "POST /message"], ["exec", "POST /sandbox/exec `true`"]]) for (const c of LEVELS) if (worker[key]?.[c]) p(latRow(label, c, worker[key][c]));
p("", "![p50 and p99 latency per endpoint and concurrency](benchmarks.svg)", "");
p(`Bars are p50, whiskers reach p99; the dashed lines are the floors (loopback HTTP round trip at concurrency 1 and fork+exec of /bin/true). Log scale.${compare ? " The last groups are the side-by-side runs below: the Rust worker (solid) against the JavaScript reference (light), both under wrk." : ""}`, "");

// ---- the Rust worker against the JavaScript reference
const COMPARED = [["health", "GET /health"], ["history", "GET /messages"], ["message", "POST /message"], ["exec", "POST /sandbox/exec `true`"]];
if (compare) {
  const cs = compare.settings;
  const ratio = (x) => (x == null ? "–" : `${x.toFixed(2)}×`);
  const more = (x) => (x >= 1 ? `${((x - 1) * 100).toFixed(0)}% more` : `${((1 - x) * 100).toFixed(0)}% fewer`);
  p("## Rust worker vs JavaScript reference", "");
  p(`\`bench/reference/index.js\` is the same worker written plainly in JavaScript (one module, no dependencies): the same routes, limits and error bodies, the same Durable Objects and SQLite tables written and read at the same moments (on workerd the response to a request that wrote waits for the commit, so a reference that wrote more would measure storage, not language), the same model input, \`<run>\` rounds and sandboxd calls. \`bench/compare.mjs\` serves both on workerd the same way (each in its own process, each with the scripted AI stand-in, one shared sandboxd), first checks that they answer alike (${compare.smoke.requests} requests, ${compare.smoke.differences} differences; also \`node --test bench/compare.test.mjs\`), then loads each with wrk (${cs.threads} threads, ${cs.connections} connections, keep-alive; a separate process): ${cs.rounds} round${cs.rounds === 1 ? "" : "s"} of ${cs.seconds} s per worker and endpoint after ${cs.warmSeconds} s of warm-up, alternating Rust, JS, Rust, JS, …. The room endpoints are spread over ${cs.rooms} rooms (so ${cs.rooms} DuetAgent or Sandbox objects, and for exec the same ${cs.rooms} shells for both workers); each room's history is full (20 messages) before measuring, and the model answers at once without \`<run>\` tags. Figures are medians over the rounds; the ratios are medians of the per-round ratios (throughput above 1× and latency and CPU below 1× favour Rust). CPU is workerd's (user + system, from /proc) over a round, divided by the requests it served: the work each request costs, which, unlike throughput, other load on the machine hardly moves.`, "");
  if (compare.quick) p(`**Quick run (\`BENCH_QUICK=1\`, ${cs.rounds} rounds of ${cs.seconds} s): do not quote these figures.**`, "");
  const cpu = (s) => (s.cpuUsPerRequest == null ? "–" : s.cpuUsPerRequest.toFixed(0));
  p("| endpoint | worker | req/s | p50 ms | p99 ms | CPU µs/req | errors | Rust/JS req/s | Rust/JS p99 | Rust/JS CPU |", "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|");
  for (const [key, label] of COMPARED) {
    const e = compare.endpoints[key];
    if (!e) continue;
    const errs = (s) => (s.errors ? `**${s.errors}** (${Object.entries(s.errorKinds).filter(([, v]) => v).map(([k, v]) => `${k} ${v}`).join(", ")})` : "0");
    p(`| ${label} | Rust | ${e.rust.requestsPerSec.toFixed(0)} | ${ms(e.rust.p50Ms)} | ${ms(e.rust.p99Ms)} | ${cpu(e.rust)} | ${errs(e.rust)} | **${ratio(e.ratio.throughput)}** | **${ratio(e.ratio.p99)}** | **${ratio(e.ratio.cpu)}** |`);
    p(`| | JavaScript | ${e.js.requestsPerSec.toFixed(0)} | ${ms(e.js.p50Ms)} | ${ms(e.js.p99Ms)} | ${cpu(e.js)} | ${errs(e.js)} | | | |`);
  }
  p("");
  for (const [key, label] of COMPARED) {
    const e = compare.endpoints[key];
    if (!e) continue;
    const perRound = (s) => s.rounds.map((x) => x.requestsPerSec.toFixed(0)).join(", ");
    p(`- ${label}: Rust serves ${more(e.ratio.throughput)} requests per second than the reference (per round, req/s: Rust ${perRound(e.rust)}; JS ${perRound(e.js)}), p50 ${ratio(e.ratio.p50)}, p99 ${ratio(e.ratio.p99)}.`);
  }
  p("");
}

// ---- a room token against the service token
if (access) {
  const as = access.settings;
  const ratio = (x) => (x == null ? "–" : `${x.toFixed(2)}×`);
  p("## Room tokens on the warm path", "");
  p(`What checking a room token costs a warm request, measured ${access.date.slice(0, 10)} (${access.date.slice(11, 16)} UTC) by \`node bench/compare.mjs --access\`: the Rust worker in token mode on workerd, in a process of its own (the scripted AI stand-in, one sandboxd), loaded by wrk (${as.threads} threads, ${as.connections} connections, keep-alive; a separate process) with the same requests to the same ${as.rooms} rooms either way, carrying either the service token or a writer's room token of each room (${as.rooms} tokens). ${as.rounds} rounds of ${as.seconds} s per token and endpoint after ${as.warmSeconds} s of warm-up; which goes first alternates from round to round (they share one worker). A room token is checked in the front door (its MAC, by WebCrypto, its expiry, room and role), and its generation in the room's object; each isolate keeps the claims of the tokens it has checked or read, so the HMAC and the decoding are paid once per token. Figures are medians over the rounds, ratios medians of the per-round ratios (room token / service token); CPU is workerd's per request, as above.`, "");
  if (access.quick) p(`**Quick run (\`BENCH_QUICK=1\`): do not quote these figures.**`, "");
  const cpu = (s) => (s.cpuUsPerRequest == null ? "–" : s.cpuUsPerRequest.toFixed(0));
  p("| endpoint | token | req/s | p50 ms | p99 ms | CPU µs/req | errors | room/service req/s | room/service p99 | room/service CPU |", "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|");
  for (const [key, label] of COMPARED) {
    const e = access.endpoints[key];
    if (!e) continue;
    p(`| ${label} | room (writer) | ${e.room.requestsPerSec.toFixed(0)} | ${ms(e.room.p50Ms)} | ${ms(e.room.p99Ms)} | ${cpu(e.room)} | ${e.room.errors} | **${ratio(e.ratio.throughput)}** | **${ratio(e.ratio.p99)}** | **${ratio(e.ratio.cpu)}** |`);
    p(`| | service | ${e.service.requestsPerSec.toFixed(0)} | ${ms(e.service.p50Ms)} | ${ms(e.service.p99Ms)} | ${cpu(e.service)} | ${e.service.errors} | | | |`);
  }
  p("");
  for (const [key, label] of COMPARED) {
    const e = access.endpoints[key];
    if (!e) continue;
    const perRound = (s) => s.rounds.map((x) => x.cpuUsPerRequest?.toFixed(0) ?? "–").join(", ");
    p(`- ${label}: CPU per request, per round (µs): room token ${perRound(e.room)}; service token ${perRound(e.service)}; per-round ratios ${e.ratio.perRound.map((x) => ratio(x.cpu)).join(", ")}.`);
  }
  p("");
}

p("## sandboxd alone", "");
p("Straight to sandboxd's HTTP API (`POST /v1/sandboxes/{name}/exec`) with the same client. Milliseconds.", "");
p("| command | concurrency | p50 | p95 | p99 | req/s | requests |", "|---|---:|---:|---:|---:|---:|---:|");
p(latRow("`true` (bash builtin)", "c1", sd.true), latRow("`echo hi` (bash builtin)", "c1", sd.echoHi), latRow("`/bin/true` (fork+exec inside bash)", "c1", sd.binTrue));
for (const c of ["c8", "c32"]) p(latRow("`true`, one sandbox per client", c, sd.trueConcurrent[c]));
p("");
const b = (x) => `wall ${ms(x.wallMs)} ms; per command p50 ${ms(x.p50)}, p99 ${ms(x.p99)}, max ${ms(x.max)}`;
const st = sd.steady;
p("| scenario | result |", "|---|---|");
p(`| burst: 50 parallel \`echo hi\` across 50 new sandboxes (each starts a bash) | ${b(sd.burst50Cold)} |`);
p(`| the same burst again (warm sandboxes) | ${b(sd.burst50Warm)} |`);
p(`| ${st.ratePerSecond} commands/s for ${st.seconds} s (\`true\` / \`echo hi\` alternating, one sandbox, open loop) | all: p50 ${ms(st.all.p50)}, p99 ${ms(st.all.p99)}, max ${ms(st.all.max)}; ${st.errors} errors |`);
p(`| … first 10 s vs last 10 s (drift) | p50 ${ms(st.first10s.p50)} → ${ms(st.last10s.p50)}, p99 ${ms(st.first10s.p99)} → ${ms(st.last10s.p99)} |`);
p(`| … per 10 s (p50 / p99) | ${st.buckets.map((x) => `${x.from}–${x.to} s: ${ms(x.p50)} / ${ms(x.p99)}`).join("; ")} |`);
const o = sd.output10MB;
p(`| one command printing 10 MB, default \`--output-limit\` (1 MiB kept per stream) | median ${ms(o.defaultLimit.medianMs)} ms (runs: ${o.defaultLimit.runs.map(ms).join(", ")}); ${o.defaultLimit.stdoutBytesReturned.toLocaleString("en-US")} B returned, truncated: ${o.defaultLimit.truncated} |`);
p(`| the same with \`--output-limit\` 16 MiB (all 10 MB returned as JSON) | median ${ms(o.limit16MiB.medianMs)} ms (runs: ${o.limit16MiB.runs.map(ms).join(", ")}); ${o.limit16MiB.stdoutBytesReturned.toLocaleString("en-US")} B returned |`, "");

p("## Floors", "");
p("| floor | p50 | p95 | p99 | req/s |", "|---|---:|---:|---:|---:|");
p(`| fork + execv + waitpid of /bin/true (\`bench/floor/spawn.rs\`, ${floors.spawn.forkExec.n} runs) | ${ms(floors.spawn.forkExec.p50)} | ${ms(floors.spawn.forkExec.p95)} | ${ms(floors.spawn.forkExec.p99)} | |`);
p(`| std::process::Command (posix_spawn) of /bin/true (${floors.spawn.commandSpawn.n} runs) | ${ms(floors.spawn.commandSpawn.p50)} | ${ms(floors.spawn.commandSpawn.p95)} | ${ms(floors.spawn.commandSpawn.p99)} | |`);
for (const c of LEVELS) {
  const s = floors.http[c];
  p(`| loopback HTTP round trip to a trivial Node server answering 200, concurrency ${c.slice(1)} | ${ms(s.p50)} | ${ms(s.p95)} | ${ms(s.p99)} | ${s.throughput.toFixed(0)} |`);
}
p("");

const { rounds, lifecycle, engine, files } = r.sections;
if (rounds) {
  p("## The agent loop", "");
  p("One `/message` by the number of model answers it takes (the scripted model answers at once; each answer but the last runs one `true`), concurrency 1: what the loop itself costs per round.", "");
  p("| answers | commands | p50 | p95 | p99 | n |", "|---:|---:|---:|---:|---:|---:|");
  for (const [n, commands] of [["1", 0], ["2", 1], ["4", 4]]) {
    const x = rounds[`rounds${n}`];
    if (x) p(`| ${n} | ${commands} | ${ms(x.p50)} | ${ms(x.p95)} | ${ms(x.p99)} | ${x.completed} |`);
  }
  p("");
}
// ---- the first delta on the live feed against the full reply
if (firstDelta) {
  const fd = firstDelta.settings;
  const pair = (x) => `${ms(x.p50)} / ${ms(x.p99)}`;
  const percent = (part, whole) => `${Math.round((part / whole) * 100)}%`;
  p("## The first delta against the full reply", "");
  p(`How soon a watcher sees an answer begin, measured ${firstDelta.date.slice(0, 10)} (${firstDelta.date.slice(11, 16)} UTC) by \`node bench/first-delta.mjs\`: the Workers AI stand-in streams at a fixed pace, a piece of about four characters every ${fd.tokenMs} ms (\`long <n>\` answers n words); the worker runs on workerd in a process of its own (\`bench/lib/serve-worker.mjs\`, the stand-in with it), the client in another. ${fd.runs} runs per answer length, one at a time, each in a fresh room with one watcher on its live feed (WebSocket, \`duet.v1\`) opened before the \`POST /message\`. Measured from sending the message: the first \`delta\` event on the watcher's feed, and the \`/message\` response read whole (the full reply). The reference beside each is the floor: the same stand-in read directly by the client, with the very request the worker sends it (taken from a warm-up exchange), started at the same moment as the message so that both see the same machine; its first piece of text, and the end of its stream. "The worker adds" is the difference run by run. Milliseconds, p50 / p99; of ${fd.runs} runs, p99 is the slowest, so one run slowed by other work on the machine sets it.`, "");
  if (firstDelta.quick) p("**Quick run (`BENCH_QUICK=1`): do not quote these figures.**", "");
  p("| measure | the worker | reference: the stand-in read directly | the worker adds | why |", "|---|---:|---:|---:|---|");
  const lengths = Object.values(firstDelta.lengths);
  for (const [k, l] of lengths.entries()) {
    const label = `\`long ${l.words}\` (${l.pieces} pieces)`;
    const whyFirst =
      k === 0
        ? `the stand-in sends its first piece one pace (${fd.tokenMs} ms) after its request; the worker's own request leaves only after the front worker, the hop to the room's DuetAgent (its history read, the user's message published to the feed through the Sandbox object) and the AI binding's way out through Miniflare's remote proxy, and the piece comes back that way, is read from the event stream and published at once (the 100 ms coalescing holds back only later pieces).`
        : `the same path as for \`long ${lengths[0].words}\`: how soon the answer shows does not depend on its length.`;
    p(`| ${label}: first delta on the feed | ${pair(l.worker.firstDelta)} | first piece ${pair(l.standin.firstPiece)} | ${pair(l.added.firstDelta)} | ${whyFirst} |`);
    p(`| ${label}: full reply (\`/message\` answered) | ${pair(l.worker.reply)} | end of stream ${pair(l.standin.end)} | ${pair(l.added.reply)} | the stream's length is the pace times the pieces; on top come the later start of the worker's request and, after the last piece, storing the exchange, publishing the agent's message and answering with the 20-message window. A watcher sees the answer begin after ${percent(l.worker.firstDelta.p50, l.worker.reply.p50)} of this wait (p50). |`);
  }
  p("");
}
// ---- the live feed: a line's way to the watchers, and a resume of a full log
if (feed) {
  const fd = feed.settings;
  const pair = (x) => `${ms(x.p50)} / ${ms(x.p99)}`;
  const span = ([lo, hi]) => (lo === hi ? `${lo}` : `${lo}–${hi}`);
  p("## The live feed", "");
  p(`How soon a line a command prints reaches the room's watchers${feed.lines.watchers1?.job ? " (and a line a job prints, one watcher's)" : ""}, and how soon a watcher that comes back after a full log has caught up, measured ${feed.date.slice(0, 10)} (${feed.date.slice(11, 16)} UTC) by \`node bench/feed.mjs\`: the worker runs on workerd in a process of its own (\`bench/lib/serve-worker.mjs\`), sandboxd in another, and the watchers (WebSockets, \`duet.v1\`, acknowledging every eighth event) in the client's. Milliseconds, p50 / p99.${feed.load?.length ? ` The machine's 1-minute load average went from ${Math.min(...feed.load.map((l) => l.loadavg[0])).toFixed(2)} to ${Math.max(...feed.load.map((l) => l.loadavg[0])).toFixed(2)} on ${r.machine?.nproc ?? "its"} CPUs during the run, other work running beside it: the figures compare with each other, within the run, more than with other runs.` : ""}`, "");
  if (feed.quick) p("**Quick run (`BENCH_QUICK=1`): do not quote these figures.**", "");
  p(`**A line's latency.** ${fd.runs} commands per watcher count, each \`for i in $(seq 1 ${fd.lines}); do date +%s%N; sleep ${fd.lineSleep}; done\` through \`POST /sandbox/exec\`: every line carries the moment it was printed (the machine's wall clock) and is timed when the \`output\` event holding it arrives, on the same clock (${/Date\.now/.test(fd.clock) ? "\`Date.now()\`, to a fraction of a ms: \`performance.now()\` places each reading within its millisecond, as its monotonic clock alone runs apart from the wall clock on this machine" : "\`performance.timeOrigin + performance.now()\`, to a fraction of a ms"}); an event may hold several lines, and each counts, at every watcher. The reference is the floor: the same command, started at the same moment in a sandbox of its own, read directly from sandboxd's stream (\`POST /v1/sandboxes/{name}/exec/stream\`), which is what the Sandbox object reads. sandboxd holds output up to 50 ms to gather it into fewer events (sooner once 16 KiB wait), so the floor is about 50 ms by design; the difference is what the worker (the object's read of the stream, the log's SQLite write, the frame to each socket) and the WebSocket add.${feed.lines.watchers1?.job ? ` With one watcher, each command is followed by the same command started as a job (\`POST /api/rooms/{roomId}/jobs\`), its lines timed as the \`job_output\` events holding them arrive; its floor is the same job started in sandboxd (\`POST /v1/sandboxes/{name}/jobs\`, at the same moment) with its output stream read directly (\`GET /v1/sandboxes/{name}/jobs/{id}/output\`), which is what the object's follower reads. The command's and the job's figures come from the same run, their runs alternating, so from the same minutes on this shared machine.` : ""}`, "");
  p("| watchers | lines timed | the worker | reference: sandboxd's stream read directly | the worker adds | why |", "|---:|---:|---:|---:|---:|---|");
  const counts = Object.values(feed.lines);
  const lone = counts.find((l) => l.watchers === 1);
  for (const l of counts) {
    const why =
      l.watchers === 1
        ? `per \`output\` event (${l.outputEvents} for ${(l.commands * fd.lines).toLocaleString("en-US")} lines) the object parses sandboxd's line, logs the event (one SQLite insert) and sends one frame; the socket crosses workerd's HTTP stack to the client.`
        : `each event goes out to ${l.watchers} sockets in one turn of the object (per socket: its tags read, its counters checked, the frame sent); the first watcher to get a line gets it after ${pair(l.firstWatcher)}${lone ? ` (${ms(l.firstWatcher.p50 - l.floor.p50)} ms over the floor at p50, against ${ms(lone.added.p50)} for a lone watcher)` : ""}, and from there to the last, over the watchers, ${pair(l.fanOut)} pass, which includes this client's own handling of ${l.watchers} frames in one event loop.`;
    p(`| ${l.watchers} | ${l.worker.n.toLocaleString("en-US")} | ${pair(l.worker)} | ${pair(l.floor)} (n ${l.floor.n}) | ${pair(l.added)} | ${why} |`);
    const j = l.job;
    if (j) {
      const sooner = l.worker.p50 - j.worker.p50;
      p(`| ${l.watchers}, a job's line | ${j.worker.n.toLocaleString("en-US")} | ${pair(j.worker)} | sandboxd's job stream: ${pair(j.floor)} (n ${j.floor.n}) | ${pair(j.added)} | ${j.jobs} jobs, their runs alternating with the commands of the row above. A job's output stream sends what the job printed as soon as it is read, without the 50 ms a command's stream holds output to gather it: a job's line reaches the watcher ${ms(Math.abs(sooner))} ms ${sooner >= 0 ? "sooner" : "later"} than a command's (p50). Per \`job_output\` event (${j.outputEvents} for ${(j.jobs * fd.lines).toLocaleString("en-US")} lines) the object's follower parses sandboxd's line, keeps the job's newest output in its row and logs the event (two SQLite writes) and sends one frame. ${j.floor.p99 > j.worker.p99 / 2 ? "The p99 follows the few lines that sandboxd's job stream itself gave late (its own p99, beside). " : ""}|`);
    }
  }
  p("");
  const rs = feed.resume;
  p(`**A resume of a full log.** ${fd.resumes} commands printing 1 MiB (\`head -c 1048576 /dev/zero | tr '\\0' x\`, 64 or so \`output\` events of up to 16 KiB) fill a room's log to its 1 MiB bound; it then holds events ${rs.log.oldestKept} to ${rs.log.last} (found by asking to resume after each number until the first that is not a \`gap\`). ${fd.resumes} watchers in turn connect with \`?since=${rs.log.oldestKept - 1}\`, the number just before the oldest kept, and are timed from opening the socket to the last event missed; between them, ${fd.resumes} fresh joins (no \`since\`) to their \`hello\`. The references are the same bytes arriving live, on a watcher connected while each of the 1 MiB commands printed (its \`command\` event to its \`command_end\`), with sandboxd's stream read directly under it (its \`start\` line to its \`end\`), and the fresh join's \`hello\`. Of ${fd.resumes} runs, p99 is the slowest.`, "");
  p("| measure | time | what arrives | reference | why |", "|---|---:|---|---|---|");
  p(`| resume after the full log: socket opened → the last missed event | ${pair(rs.resume.toLastMissed)} (\`hello\` after ${pair(rs.resume.toHello)}) | ${rs.resume.events} events, ${bytes(rs.resume.bytes)} | the same bytes live: ${pair(rs.live.commandToEnd)} (next row); a fresh join's \`hello\`: ${pair(rs.freshJoin.toHello)} (last row) | the object reads the missed events in one SQLite query and sends them all, after the \`hello\`, while accepting the socket: nothing waits on sandboxd, and the frames are the log's rows with their numbers. As the room's only watcher, it also waits, as a fresh join does, for the room's DuetAgent to be told someone watches (one object hop) before its socket is answered. |`);
  p(`| the same 1 MiB live: \`command\` → \`command_end\` | ${pair(rs.live.commandToEnd)} | ${span(rs.live.events)} events, at most ${bytes(rs.live.bytes[1])} | sandboxd's stream read directly: ${pair(rs.direct.startToEnd)} (${span(rs.direct.outputEvents)} output events) | sandboxd's stream is the floor; the rest is the object reading it as it comes (twice the output: its end line is the whole \`/exec\` answer, stdout included), each piece parsed, logged and sent before the next is read. The exec is answered after ${pair(rs.live.execAnswered)}; the same exec where nobody watches, which reads sandboxd's plain \`/exec\` and gives the log its 64 events whole at the end, after ${pair(rs.unwatched.execAnswered)}${rs.unwatched.execAnswered.p50 < rs.live.execAnswered.p50 / 2 ? ": the log's writes are not what takes the time" : ""}. |`);
  p(`| a fresh join: socket opened → \`hello\` | ${pair(rs.freshJoin.toHello)} | one frame of ${bytes(rs.freshJoin.helloBytes)} (empty history, ${rs.freshJoin.recentEvents} events of the terminal's past) | – | the terminal's past is at most 64 KiB of whole events, read from the log newest first; the history is asked of the room's DuetAgent, which is then told someone watches: two object hops. |`);
  p("");
}
// ---- the shared terminal: a keystroke to its echo
if (terminal) {
  const ts = terminal.settings;
  const pair = (x) => `${ms(x.p50)} / ${ms(x.p99)}`;
  const tl = terminal.load.map((l) => l.loadavg[0]);
  p("## The shared terminal", "");
  p(`How soon a key typed into the room's shared terminal comes back as its echo, measured ${terminal.date.slice(0, 10)} (${terminal.date.slice(11, 16)} UTC) by \`node bench/terminal.mjs\`: clients connect to one room's terminal (\`GET /api/rooms/{roomId}/terminal\`, \`duet.term.v1\`, an open worker), and one of them types a single letter at a time at bash's prompt, each timed from sending its \`input\` frame to the arrival of the \`output\` frame holding its echo, at the typing client and, with ${Math.max(...ts.clients)} clients, at each of the others (the row takes the last of them to get it). A key is typed ${ts.gapMs} ms after the last one's echo reached every client; after ${ts.keysPerLine} keys, Ctrl-U clears the line. The reference is the floor: the same keystroke typed into a terminal of its own straight through sandboxd (\`POST /v1/sandboxes/{name}/terminal/input\`) and its echo read from sandboxd's output stream (\`GET /v1/sandboxes/{name}/terminal/output\`), which is what the Sandbox object writes and reads; each keystroke through the worker and one through sandboxd take turns, so that both see the same minutes, and "the worker adds" is the difference of the percentiles. The worker runs on workerd in a process of its own (\`bench/lib/serve-worker.mjs\`), sandboxd in another, and every client in a third, so one clock (\`performance.now()\`) times both ends. Milliseconds, p50 / p99. These figures come from one run on a shared ${r.machine?.nproc ?? ""}-core machine (its 1-minute load average between ${Math.min(...tl).toFixed(2)} and ${Math.max(...tl).toFixed(2)}): read them relative to each other, not as absolute figures.`, "");
  if (terminal.quick) p("**Quick run (`BENCH_QUICK=1`): do not quote these figures.**", "");
  p("| clients | keystrokes | who | keystroke → echo | reference: sandboxd directly | the worker adds |", "|---:|---:|---|---:|---:|---:|");
  for (const c of Object.values(terminal.counts)) {
    p(`| ${c.clients} | ${c.keystrokes} | the typing client | ${pair(c.typing)} | ${pair(c.floor)} | ${pair(c.typingAdded)} |`);
    if (c.slowestOther) p(`| ${c.clients} | ${c.keystrokes} | the last of the ${c.clients - 1} others | ${pair(c.slowestOther)} | ${pair(c.floor)} | ${pair(c.slowestOtherAdded)} |`);
  }
  p("", "Through the worker a key goes from the client's socket to the room's Sandbox object, which writes it to sandboxd's input route (one request at a time, in order); the echo comes back on sandboxd's output stream, which the object follows, and goes out as a frame to every socket of the room in one turn of the object.", "");
}
// ---- the room as an MCP server: run_command against /sandbox/exec
if (mcp) {
  const st = mcp.settings;
  const pair = (x) => `${ms(x.p50)} / ${ms(x.p99)}`;
  const times = (a, b) => `${(a / b).toFixed(2)}×`;
  const connect = mcp.sdkConnect.map((x) => `${x.http}${x.method ? ` \`${x.method}\`` : ""} ${x.status}`).join(", ");
  p("## The room as an MCP server", "");
  p(`What a command costs through the room's MCP server, measured ${mcp.date.slice(0, 10)} (${mcp.date.slice(11, 16)} UTC) by \`node bench/mcp.mjs\`: \`tools/call run_command\` on \`POST /api/rooms/{roomId}/mcp\` against the same command through \`POST /api/rooms/{roomId}/sandbox/exec\`. The worker runs on workerd in a process of its own (\`bench/lib/serve-worker.mjs\`), sandboxd in another, the client in a third; all requests go to one room, so to the same Sandbox object and the same bash. ${st.runs} iterations per command after ${st.warmup} of warm-up; each runs the three ways one after the other, in an order that turns from one iteration to the next (${st.orders.map((o) => o.replace("hand", "a").replace("sdk", "b").replace("exec", "c")).join(", ")}), so that all three see the same machine, and every answer is checked (exit code 0, the whole stdout). The three ways: (a) one JSON-RPC POST by hand, the wire cost alone (\`content-type: application/json\`, \`accept: application/json, text/event-stream\`, \`mcp-protocol-version: ${st.protocolVersion}\`; no \`initialize\`: the server is stateless, and the run's first request, a \`tools/call\` out of the blue, was answered ${mcp.stateless.status} with \`${mcp.stateless.contentType}\` and ${mcp.stateless.sessionId === null ? "no session" : `session ${mcp.stateless.sessionId}`}); (b) the official SDK client's \`callTool\` (\`${st.sdk}\`, default handshake, connected once and reused: ${connect}; the tools listed once, as a client does, so that each result is checked against \`run_command\`'s \`outputSchema\`; one POST per call, counted); (c) \`/sandbox/exec\`, the reference. "Added" is the difference iteration by iteration. Milliseconds, p50 / p99; on this shared machine p99 is set by other work more than by either path.`, "");
  if (mcp.quick) p("**Quick run (`BENCH_QUICK=1`): do not quote these figures.**", "");
  p("| command | way | time | reference | added | why |", "|---|---|---:|---:|---:|---|");
  const trivial = mcp.commands.trivial;
  for (const c of Object.values(mcp.commands)) {
    const label = `\`${c.command}\`${c.stdoutBytes > 1024 ? ` (${bytes(c.stdoutBytes)} of stdout)` : ""}`;
    const enc = c.encoding.mcp || c.encoding.exec ? ` (workerd ${c.encoding.mcp === c.encoding.exec ? `${c.encoding.mcp}s both` : `gives MCP ${c.encoding.mcp ?? "none"}, exec ${c.encoding.exec ?? "none"}`}, as the client's fetch accepts it)` : "";
    const big = c.stdoutBytes > 1024;
    p(`| ${label} | (c) \`/sandbox/exec\` | ${pair(c.exec)} | – | – | the reference: front door → Sandbox object → sandboxd and back; its answer is ${bytes(c.answerBytes.exec)}${enc}. |`);
    p(`| | (a) \`tools/call\` by hand | ${pair(c.hand)} | (c) ${pair(c.exec)} | ${pair(c.added.handOverExec)} | one object hop more: front door → DuetAgent (the JSON-RPC message and its headers read, the room's policy judged, the room's use noted) → Sandbox object (the same exec, as source \`mcp\`) → sandboxd; the result comes back through the DuetAgent, which reads it and writes it twice, as text and as \`structuredContent\`, in the JSON-RPC answer: ${bytes(c.answerBytes.mcp)}, ${times(c.answerBytes.mcp, c.answerBytes.exec)} exec's${big ? `; the ${ms(c.added.handOverExec.p50 - trivial.added.handOverExec.p50)} ms added beyond \`echo hi\`'s (p50) go with the output: the result crosses one more object boundary (${kib(c.answerBytes.exec)} from the Sandbox object to the DuetAgent, then ${kib(c.answerBytes.mcp)} to the front door, against exec's ${kib(c.answerBytes.exec)} once), is parsed and written again, and the text, JSON inside a JSON string, escapes each newline twice` : ""}. |`);
    p(`| | (b) the SDK's \`callTool\` | ${pair(c.sdk)} | (a) ${pair(c.hand)} | ${pair(c.added.sdkOverHand)} (over (c): ${pair(c.added.sdkOverExec)}) | the same request on the wire (${c.sdkRequestsPerCall} POST per call); on top, the SDK's own work in the client: the request built and sent through its transport, the answer's content type checked, the result parsed and checked against the protocol's schema and \`structuredContent\` against \`run_command\`'s \`outputSchema\`${big ? `, here on an answer of ${kib(c.answerBytes.mcp)}` : ""}. |`);
  }
  p("");
}
// ---- files through the worker against the floor and against exec
if (files) {
  const fs_ = files.settings;
  const mib = (fs_.bytes / (1024 * 1024)).toFixed(0);
  const sec = (t) => (t.secondsPer8MiB < 1 ? t.secondsPer8MiB.toFixed(3) : t.secondsPer8MiB < 10 ? t.secondsPer8MiB.toFixed(2) : t.secondsPer8MiB.toFixed(1));
  const rate = (t) => (t.mibPerSecond < 1 ? t.mibPerSecond.toFixed(2) : t.mibPerSecond < 10 ? t.mibPerSecond.toFixed(1) : t.mibPerSecond.toFixed(0));
  const runs = (t) => t.runsMs.map((x) => sec({ secondsPer8MiB: x / 1000 })).join(", ");
  const fl = files.load.map((l) => l.loadavg[0]);
  const times = (x) => `${x.toFixed(x < 10 ? 1 : 0)}×`;
  const { worker: fw, floor: ff, exec: fe, workerAdds: add } = files;
  p("## Files through the worker", "");
  p(`How fast a file of ${mib} MiB, the most a \`PUT\` takes and a \`GET\` answers whole, goes into a room's workspace and comes out of it, measured ${files.date.slice(0, 10)} (${files.date.slice(11, 16)} UTC) by \`node bench/files.mjs\`: through the worker's files route (\`PUT\` and \`GET /api/rooms/{roomId}/files?path=P\`: the front worker, the room's Sandbox object, which relays the bytes to sandboxd and back, streamed both ways), beside the floor, the same requests straight to sandboxd's own files route (\`/v1/sandboxes/{name}/files?path=P\`), and beside the way a client without the files route would do it, through \`POST /sandbox/exec\`: a command is at most ${fs_.cmdMax.toLocaleString("en-US")} characters and an exec's stdout is cut at 1 MiB, so a write is ${fe.write.commands.toLocaleString("en-US")} commands (one empties the file, then each appends ${fs_.writeChunk.toLocaleString("en-US")} bytes: \`printf %s '<base64>' | base64 -d >> f\`) and a read ${fe.read.commands} commands (\`tail -c +N f | head -c ${fs_.readChunk} | base64 -w0\`, under 1 MiB of stdout each, decoded by the client). The worker runs on workerd in a process of its own (\`bench/lib/serve-worker.mjs\`), sandboxd in another, the client (Node's fetch) in a third; one transfer at a time, ${fs_.runs} run${fs_.runs === 1 ? "" : "s"}, the worker's and the floor's requests taking turns going first. Every transfer is checked byte for byte, so that a wrong figure fails the run: each write carries fresh random bytes and the file's sha256 is then taken by \`sha256sum\` in the sandbox's shell; each read's bytes are hashed against the file's. Seconds per ${mib} MiB and MiB/s are the median run's.`, "");
  p(`The machine's 2 cores were shared with other work (1-minute load average ${Math.min(...fl).toFixed(2)}–${Math.max(...fl).toFixed(2)} during these runs), so the figures are for comparing with each other, measured in the same run, not as absolute speeds.`, "");
  if (files.quick) p("**Quick run (`BENCH_QUICK=1`, one run): do not quote these figures.**", "");
  p(`| transfer | way | seconds per ${mib} MiB | MiB/s | runs (s) | what it includes |`, "|---|---|---:|---:|---|---|");
  p(`| write | \`PUT\` through the worker | ${sec(fw.put)} | ${rate(fw.put)} | ${runs(fw.put)} | the body streamed through workerd's front worker and the room's Sandbox object to sandboxd, which writes it beside the target and renames it over it once whole; the room's \`file\` event and audit entry |`);
  p(`| | \`PUT\` straight to sandboxd (the floor) | ${sec(ff.put)} | ${rate(ff.put)} | ${runs(ff.put)} | the same request and the same write, without the worker |`);
  p(`| | through exec | ${sec(fe.write)} | ${rate(fe.write)} | ${runs(fe.write)} | ${fe.write.commands.toLocaleString("en-US")} execs one after the other, ${ms(fe.write.msPerCommand)} ms each (p50 run): each a round trip through the worker and the Sandbox object to the room's bash, with its events on the room's feed and its audit entry, for ${fs_.writeChunk.toLocaleString("en-US")} bytes sent as ${(4 * fs_.writeChunk / 3).toLocaleString("en-US")} characters of base64 |`);
  p(`| read | \`GET\` through the worker | ${sec(fw.get)} | ${rate(fw.get)} | ${runs(fw.get)} | sandboxd's answer streamed back through the Sandbox object and the front worker |`);
  p(`| | \`GET\` straight to sandboxd (the floor) | ${sec(ff.get)} | ${rate(ff.get)} | ${runs(ff.get)} | the same request, without the worker |`);
  p(`| | through exec | ${sec(fe.read)} | ${rate(fe.read)} | ${runs(fe.read)} | ${fe.read.commands} execs, ${ms(fe.read.msPerCommand)} ms each (p50 run): bash runs \`tail\`, \`head\` and \`base64\`, sandboxd gathers the stdout and answers it inside JSON, the worker passes it on (and logs it for the room's feed, in events of 16 KiB), the client parses the JSON and decodes the base64: ${(fe.read.base64Bytes / 1024 / 1024).toFixed(1)} MiB of text for ${mib} MiB of bytes |`);
  p("");
  const share = (ms_, ratio) => (ms_ >= 0 ? `adds ${ms(ms_)} ms to the floor's median (${ratio.toFixed(2)}× its time)` : `has a median ${ms(-ms_)} ms below the floor's (${ratio.toFixed(2)}× its time; see the runs)`);
  p(`- **The worker's share.** A \`PUT\` through the worker ${share(add.putMs, add.putRatio)}; a \`GET\` ${share(add.getMs, add.getRatio)}. Both cross workerd twice, the front worker and then the room's Sandbox object, as streams; a \`PUT\` is also logged once sandboxd has answered (its \`file\` event and audit entry, SQLite writes), which a \`GET\` is not. The floor includes the client's own reading and writing of ${mib} MiB through Node's fetch, which the worker's figures include too.`);
  p(`- **The files route against exec.** Writing ${mib} MiB through the files route is ${times(files.filesOverExec.write)} as quick as through exec; reading it, ${times(files.filesOverExec.read)}. Through exec the cost is the number of commands (${fe.write.commands.toLocaleString("en-US")} for a write, held to ${fs_.cmdMax.toLocaleString("en-US")} characters each) and the base64 (a third more bytes each way, parsed as JSON strings), and each command takes the room's shell for its turn.`);
  p("");
}
if (lifecycle) {
  p("## Rooms that sleep", "");
  p("sandboxd's archive of a workspace (save, `GET /v1/sandboxes/{name}/archive`) and its restore into a fresh sandbox (`PUT`), and a woken room's first command through the worker (the restore of its archive from the object's storage included), for a small workspace and one of 50 files of base64 (about 50 MB).", "");
  p("| workspace | archive | save p50 | restore p50 | woken room's first command p50 |", "|---|---:|---:|---:|---:|");
  for (const [size, label] of [["small", "small (two files)"], ["mb50", "50 MB"]]) {
    const sv = lifecycle.save[size], rs = lifecycle.restore[size], wk = lifecycle.wake[size];
    if (sv) p(`| ${label} | ${bytes(sv.archiveBytes)} | ${ms(sv.p50)} ms | ${ms(rs.p50)} ms | ${ms(wk.p50)} ms |`);
  }
  p("");
}

// ---- the container path on a real engine
if (engine) {
  const row = (what, c, u, why) => p(`| ${what} | ${ms(c.p50)} (${ms(c.min)}–${ms(c.max)}) | ${ms(u.p50)} (${ms(u.min)}–${ms(u.max)}) | ${why} |`);
  p("## The container path on a real Docker engine", "");
  p(`Measured ${engine.date.slice(0, 10)} (${engine.date.slice(11, 16)} UTC) by \`node bench/engine.mjs\`: the worker on workerd, in a process of its own, with its Sandbox object's container run by the tests' Docker engine (dockerd ${engine.engine}, \`scripts/engine/engine\`) from the Dockerfile's image, beside the same worker through SANDBOX_URL (one sandboxd on this machine). ${engine.rooms} new rooms per measurement, one request at a time; every answer is checked. Milliseconds, median (fastest–slowest).`, "");
  if (engine.quick) p("**Quick run (`BENCH_QUICK=1`): do not quote these figures.**", "");
  p("| | container, real engine | SANDBOX_URL | what it includes |", "|---|---:|---:|---|");
  row("a cold room's first command (`true`)", engine.container.cold, engine.sandboxUrl.cold, "container: workerd creates and starts the room's networking sidecar and its container, the Sandbox object polls sandboxd's health route until it answers, then the command; SANDBOX_URL: sandboxd starts a bash for the room");
  row("the room's second command", engine.container.warm, engine.sandboxUrl.warm, "the warm path: front door → Sandbox object → sandboxd (through the sidecar's tunnel on the container path)");
  row("a sleeping room's first command (its wake)", engine.container.wake, engine.sandboxUrl.wake, "a small workspace saved when the room slept (after 2 idle seconds); then a fresh container (workerd keeps the room's sidecar, so only the container is created), its health, the files restored, the command");
  p("");
}

p("## Where the time goes", "");
p(`- Worker \`/health\` (no Durable Object) costs ${ms(d.workerHealthOverFloorP50)} ms p50 above the loopback floor: workerd's HTTP handling, entering the wasm, routing and the per-request JSON log line.`);
p(`- \`/sandbox/exec\` adds ${ms(d.workerAddsToExecP50)} ms p50 to sandboxd's own ${ms(d.sandboxdTrueP50)} ms. Split (p50 differences at concurrency 1): the front worker ${ms(d.workerHealthOverFloorP50)} ms over the loopback floor (\`/health\`), the hop to a Durable Object ${ms(d.objectHopP50)} ms (\`GET /messages\` of an empty room minus \`/health\`), and the object's fetch to sandboxd with the result parsed and re-serialised ${ms(d.sandboxdCallFromObjectP50)} ms (exec minus \`GET /messages\` minus sandboxd's own time).`);
p(`- \`/message\` at concurrency 1 (${ms(worker.message.c1.p50)} ms p50) adds, on top of the same two hops, the room's SQLite reads and writes (history trimmed to the 20-message window, which is returned whole) and a call through the AI binding (a service binding to the scripted stand-in, which answers at once).`);
p(`- sandboxd: a builtin (\`true\`, \`echo hi\`) costs about one loopback HTTP round trip plus a pipe round trip to bash; an external command adds one fork+exec (\`/bin/true\`: ${ms(sd.binTrue.p50)} ms). A new sandbox costs a bash start (burst of 50 new: ${ms(sd.burst50Cold.p50)} ms p50 vs ${ms(sd.burst50Warm.p50)} ms warm).`, "");

if (sx) {
  p("## Size experiments", "");
  p(`\`bash bench/size-experiments\` (run ${sx.date.slice(0, 10)}) builds the crate in a temporary copy with one setting changed and measures the upload as \`scripts/size-budget\` does; "smoke" is /health and one /message on workerd with that build.`, "");
  const base = sx.variants.find((v) => v.name === "baseline");
  p("| variant | wasm raw | name section | upload raw | upload gzip | vs baseline (gzip) | smoke |", "|---|---:|---:|---:|---:|---:|---|");
  for (const v of sx.variants) {
    const delta = base ? v.gzip - base.gzip : 0;
    p(`| ${v.what} | ${bytes(v.files["index_bg.wasm"].raw)} | ${v.sections["custom:name"] ? bytes(v.sections["custom:name"]) : "none"} | ${bytes(v.raw)} | ${bytes(v.gzip)} | ${v.name === "baseline" ? "–" : `${delta > 0 ? "+" : ""}${delta.toLocaleString("en-US")} B (${((delta / base.gzip) * 100).toFixed(1)}%)`} | ${v.smoke} |`);
  }
  p("");
  if (sx.twiggy?.total) {
    p(`Largest contributors to the baseline wasm by crate (twiggy, shallow bytes, raw, of ${sx.twiggy.total.toLocaleString("en-US")} B):`, "");
    p("| crate / kind | bytes | share |", "|---|---:|---:|");
    for (const c of sx.twiggy.crates.slice(0, 14)) p(`| ${c.crate.replace(/\|/g, "\\|")} | ${c.bytes.toLocaleString("en-US")} | ${((c.bytes / sx.twiggy.total) * 100).toFixed(1)}% |`);
    p("", "Largest single items:", "");
    p("| item | bytes |", "|---|---:|");
    for (const t of sx.twiggy.top.slice(0, 12)) p(`| \`${t.name.replace(/\|/g, "\\|").replace(/`/g, "'")}\` | ${t.bytes.toLocaleString("en-US")} |`);
    p("");
  }
}
fs.mkdirSync(outDir, { recursive: true });
const proposalsFile = path.join(ROOT, "bench/proposals.md");
if (fs.existsSync(proposalsFile)) p(fs.readFileSync(proposalsFile, "utf8").trim(), "");
fs.writeFileSync(path.join(outDir, "benchmarks.md"), lines.join("\n").replace(/\n{3,}/g, "\n\n") + "\n");

// ---- the plot
const rows = [];
for (const c of LEVELS) rows.push({ group: "loopback HTTP floor", c, s: floors.http[c], color: "#9e9e9e" });
for (const c of LEVELS) rows.push({ group: "sandboxd `true`", c, s: c === "c1" ? sd.true : sd.trueConcurrent[c], color: "#8d6e63" });
for (const [key, label, color] of [["health", "worker GET /health", "#1e88e5"], ["message", "worker POST /message", "#43a047"], ["exec", "worker POST /sandbox/exec", "#fb8c00"]]) {
  for (const c of LEVELS) rows.push({ group: label, c, s: worker[key][c], color });
  // The side-by-side runs (wrk), the reference in a light shade of the same colour.
  const e = compare?.endpoints[key];
  if (e) {
    const conns = compare.settings.connections;
    rows.push({ group: label, label: `Rust · wrk c=${conns}`, s: { p50: e.rust.p50Ms, p99: e.rust.p99Ms }, color });
    rows.push({ group: label, label: `JS reference · wrk c=${conns}`, s: { p50: e.js.p50Ms, p99: e.js.p99Ms }, color, light: true });
  }
}
for (const row of rows) row.label ??= `${row.group} · c=${row.c.slice(1)}`;
const W = 900, left = 250, right = 30, top = compare ? 66 : 50, rowH = 20, gap = 10;
const groups = [...new Set(rows.map((x) => x.group))];
const H = top + rows.length * rowH + groups.length * gap + 50;
const all = rows.flatMap((x) => [x.s.p50, x.s.p99]).concat([floors.spawn.forkExec.p50]);
const lo = 10 ** Math.floor(Math.log10(Math.min(...all) * 0.8)), hi = 10 ** Math.ceil(Math.log10(Math.max(...all)));
const X = (v) => left + ((Math.log10(v) - Math.log10(lo)) / (Math.log10(hi) - Math.log10(lo))) * (W - left - right);
const esc = (s) => s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/`/g, "");
const svg = [`<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="sans-serif" font-size="12">`, `<rect width="${W}" height="${H}" fill="#fff"/>`];
svg.push(`<text x="${W / 2}" y="22" text-anchor="middle" font-size="15" font-weight="bold">Latency p50 (bar) and p99 (whisker), ms, log scale, by concurrency</text>`);
if (compare) {
  // Legend for the side-by-side rows.
  const lx = 40;
  svg.push(`<rect x="${lx}" y="34" width="14" height="12" fill="#555"/><text x="${lx + 20}" y="44">Rust worker (build/)</text>`);
  svg.push(`<rect x="${lx + 160}" y="34" width="14" height="12" fill="#555" fill-opacity="0.3" stroke="#555"/><text x="${lx + 180}" y="44">JavaScript reference (bench/reference/)</text>`);
  svg.push(`<text x="${lx + 450}" y="44" fill="#555">wrk rows: ${compare.settings.connections} connections, median of ${compare.settings.rounds} round${compare.settings.rounds === 1 ? "" : "s"}</text>`);
}
for (let v = lo; v <= hi; v *= 10) {
  for (const k of [1, 2, 5]) {
    const t = v * k;
    if (t > hi) break;
    svg.push(`<line x1="${X(t)}" y1="${top - 6}" x2="${X(t)}" y2="${H - 40}" stroke="${k === 1 ? "#ccc" : "#eee"}"/>`);
    svg.push(`<text x="${X(t)}" y="${H - 26}" text-anchor="middle" fill="#555">${t >= 1 ? t : t.toFixed(1)}</text>`);
  }
}
let y = top;
let last = null;
for (const row of rows) {
  if (row.group !== last) {
    if (last) y += gap;
    last = row.group;
  }
  const cy = y + rowH / 2;
  svg.push(`<text x="${left - 8}" y="${cy + 4}" text-anchor="end">${esc(row.label)}</text>`);
  const fill = row.light ? `fill="${row.color}" fill-opacity="0.3" stroke="${row.color}"` : `fill="${row.color}"`;
  svg.push(`<rect x="${X(lo)}" y="${y + 3}" width="${Math.max(1, X(row.s.p50) - X(lo))}" height="${rowH - 6}" ${fill}><title>${esc(row.group)}, ${esc(row.label)}: p50 ${ms(row.s.p50)} ms, p99 ${ms(row.s.p99)} ms</title></rect>`);
  svg.push(`<line x1="${X(row.s.p50)}" y1="${cy}" x2="${X(row.s.p99)}" y2="${cy}" stroke="#333"/><line x1="${X(row.s.p99)}" y1="${y + 5}" x2="${X(row.s.p99)}" y2="${y + rowH - 5}" stroke="#333"/>`);
  svg.push(`<text x="${X(row.s.p99) + 4}" y="${cy + 4}" fill="#333" font-size="10">${ms(row.s.p50)} / ${ms(row.s.p99)}</text>`);
  y += rowH;
}
for (const [v, label, color] of [[floors.http.c1.p50, `loopback HTTP p50 ${ms(floors.http.c1.p50)} ms`, "#d32f2f"], [floors.spawn.forkExec.p50, `fork+exec /bin/true p50 ${ms(floors.spawn.forkExec.p50)} ms`, "#7b1fa2"]]) {
  svg.push(`<line x1="${X(v)}" y1="${top - 8}" x2="${X(v)}" y2="${y}" stroke="${color}" stroke-dasharray="5,4" stroke-width="1.5"/>`);
}
svg.push(`<text x="${left}" y="${H - 8}" fill="#d32f2f">- - loopback HTTP floor p50 ${ms(floors.http.c1.p50)} ms</text>`);
svg.push(`<text x="${left + 280}" y="${H - 8}" fill="#7b1fa2">- - fork+exec /bin/true p50 ${ms(floors.spawn.forkExec.p50)} ms</text>`);
svg.push(`<text x="${W - right}" y="${H - 8}" text-anchor="end" fill="#555">${esc(r.date.slice(0, 10))}, ${m.nproc} CPUs</text>`);
svg.push("</svg>");
fs.writeFileSync(path.join(outDir, "benchmarks.svg"), svg.join("\n") + "\n");
console.error(`wrote ${path.relative(ROOT, path.join(outDir, "benchmarks.md"))} and benchmarks.svg`);

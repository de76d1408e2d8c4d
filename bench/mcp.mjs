// What a command costs through the room's MCP server: `tools/call
// run_command` on `POST /api/rooms/{roomId}/mcp`, against the same command
// through `POST /api/rooms/{roomId}/sandbox/exec`, for a trivial command
// (`echo hi`, a bash builtin) and for one printing 64 KiB (`seq 1 12773`,
// 65,532 B of lines). Three ways each, with their references:
//
// - (a) one JSON-RPC POST by hand, the wire cost alone (no initialize: the
//   server is stateless, and the first request of the run, a tools/call
//   out of the blue, is checked to be answered), against (c): the MCP path
//   is front door → DuetAgent (the JSON-RPC message and its headers read,
//   the room's policy judged) → Sandbox object → sandboxd, one object hop
//   more than exec's front door → Sandbox object → sandboxd, and its answer
//   comes back through the DuetAgent, which writes the result twice (as
//   text and as structuredContent) in the JSON-RPC answer;
// - (b) the same call through the official SDK client's `callTool`
//   (@modelcontextprotocol/client, connected once and reused, its tools
//   listed once as a client does, so that it checks each result against
//   run_command's outputSchema), against (a): the same request on the wire
//   (one POST per call, counted), so the difference is the SDK's own work
//   in this process; and against (c), what a client of the SDK sees in all;
// - (c) `/sandbox/exec` with the same command: the reference, the shortest
//   way from a client to the room's shell.
//
// The worker runs on workerd in a process of its own (lib/worker-process.mjs)
// and sandboxd in another; this process is the client. All three go to one
// room, so to the same Sandbox object and the same bash; each iteration runs
// the three one after the other, in an order that turns from iteration to
// iteration (a b c, b c a, c a b), so that all see the same machine, and
// the differences are taken iteration by iteration. Every answer is checked
// (exit code 0, the whole stdout).
//
//   node bench/mcp.mjs                   # writes bench/results/mcp.json
//   node bench/mcp.mjs --merge FILE.json # sets FILE's sections.mcp
//   BENCH_QUICK=1 node bench/mcp.mjs     # 50 iterations per command instead of 500
//
// MCP_RUNS (iterations per command, 500) and MCP_WARMUP (iterations before
// measuring, 50) override the defaults.
import fs from "node:fs";
import path from "node:path";
import { parseArgs } from "node:util";

import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";

import { ROOT, startSandboxd, tempDir } from "../tests/e2e/support/stack.mjs";
import { postJson, round, stats } from "./lib/load.mjs";
import { progress, writeSection } from "./lib/results.mjs";
import { serveWorker } from "./lib/worker-process.mjs";

const { values: args } = parseArgs({ options: { merge: { type: "string" }, out: { type: "string" } } });
const QUICK = process.env.BENCH_QUICK === "1";
const RUNS = Number(process.env.MCP_RUNS ?? (QUICK ? 50 : 500));
const WARMUP = Number(process.env.MCP_WARMUP ?? (QUICK ? 10 : 50));
const PROTOCOL_VERSION = "2025-11-25";
// What the hand-made request carries: the transport's own headers.
const HAND_HEADERS = { "content-type": "application/json", accept: "application/json, text/event-stream", "mcp-protocol-version": PROTOCOL_VERSION };
const SEQ_TO = 12773; // `seq 1 12773` prints 65,532 B
const COMMANDS = {
  trivial: { command: "echo hi", stdout: "hi\n" },
  kib64: { command: `seq 1 ${SEQ_TO}`, stdout: Array.from({ length: SEQ_TO }, (_, i) => i + 1).join("\n") + "\n" },
};
const WAYS = ["hand", "sdk", "exec"];
const ORDERS = WAYS.map((_, k) => [...WAYS.slice(k), ...WAYS.slice(0, k)]);
const RUN_LIMIT_MS = 30_000; // a bound on each request
const SDK_VERSION = JSON.parse(fs.readFileSync(path.join(ROOT, "node_modules/@modelcontextprotocol/client/package.json"), "utf8")).version;
const out = args.merge ?? args.out ?? path.join(ROOT, "bench/results/mcp.json");
const cleanup = [];

const { log, loadavg, loadavgs } = progress("mcp");

/** `tools/call run_command` as one POST: its status, headers and body. */
async function byHand(url, id, command) {
  const body = JSON.stringify({ jsonrpc: "2.0", id, method: "tools/call", params: { name: "run_command", arguments: { command } } });
  const res = await fetch(url, { method: "POST", headers: HAND_HEADERS, body, signal: AbortSignal.timeout(RUN_LIMIT_MS) });
  return { status: res.status, headers: res.headers, text: await res.text() };
}

/** The content-encoding workerd gave an exec's answer (postJson reads only the body). */
async function execEncoding(url, cmd) {
  const res = await fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ cmd }), signal: AbortSignal.timeout(RUN_LIMIT_MS) });
  await res.arrayBuffer();
  return res.headers.get("content-encoding");
}

/** Throws unless `result` (an exec result, or a call's structuredContent) is `expected`'s. */
function check(way, result, expected) {
  if (result?.exitCode !== 0 || result.stdout !== expected.stdout || result.truncated || result.timedOut) {
    throw new Error(`${way}: ${JSON.stringify(expected.command)} answered ${JSON.stringify(result).slice(0, 300)}`);
  }
}
/** The structuredContent of a hand-made call's answer, checked. */
function handResult(answer, id, expected) {
  if (answer.status !== 200) throw new Error(`by hand: ${answer.status} ${answer.text.slice(0, 300)}`);
  const reply = JSON.parse(answer.text);
  if (reply.id !== id || reply.result?.isError !== false) throw new Error(`by hand: ${answer.text.slice(0, 300)}`);
  check("by hand", reply.result.structuredContent, expected);
  check("by hand (as text)", JSON.parse(reply.result.content[0].text), expected);
  return reply.result.structuredContent;
}

/**
 * The official client, connected once: what it sent other than its
 * tools/calls (its connect, its listTools, its try at a stream), and how
 * many tools/calls it sent.
 */
async function connectSdk(url) {
  const wire = { connect: [], requests: 0 };
  const counting = async (input, init) => {
    const method = typeof init?.body === "string" ? JSON.parse(init.body).method : undefined;
    const res = await fetch(input, init);
    if (method === "tools/call") wire.requests++;
    else wire.connect.push({ http: init?.method ?? "GET", method, status: res.status, sessionId: res.headers.get("mcp-session-id") });
    return res;
  };
  const client = new Client({ name: "duet-bench", version: "1.0.0" });
  await client.connect(new StreamableHTTPClientTransport(new URL(url), { fetch: counting }));
  const { tools } = await client.listTools();
  const tool = tools.find((t) => t.name === "run_command");
  if (!tool?.outputSchema) throw new Error(`the server lists ${JSON.stringify(tools.map((t) => t.name))}, without run_command's outputSchema`);
  return { client, wire, version: client.getNegotiatedProtocolVersion?.() ?? null };
}

/** One iteration: the three ways in `order`, each timed to its answer read whole; then checked. */
async function iteration(ctx, expected, order) {
  const ms = {};
  const answers = {};
  for (const way of order) {
    const t0 = performance.now();
    if (way === "hand") answers.hand = await byHand(ctx.mcpUrl, ++ctx.id, expected.command).then((a) => ({ ...a, id: ctx.id }));
    else if (way === "sdk") answers.sdk = await ctx.sdk.client.callTool({ name: "run_command", arguments: { command: expected.command } });
    else answers.exec = await postJson(ctx.execUrl, { cmd: expected.command });
    ms[way] = performance.now() - t0;
  }
  handResult(answers.hand, answers.hand.id, expected);
  if (answers.sdk.isError) throw new Error(`the SDK: ${JSON.stringify(answers.sdk).slice(0, 300)}`);
  check("the SDK", answers.sdk.structuredContent, expected);
  check("exec", JSON.parse(answers.exec).result, expected);
  return { ms, answers };
}

async function measure(ctx, key) {
  const expected = COMMANDS[key];
  const before = ctx.sdk.wire.requests;
  let last;
  for (let i = 0; i < WARMUP; i++) last = await iteration(ctx, expected, ORDERS[i % ORDERS.length]);
  // What each answer holds (uncompressed), and how it came.
  const mcpResult = handResult(last.answers.hand, last.answers.hand.id, expected);
  const execResult = JSON.parse(last.answers.exec).result;
  const same = (r) => JSON.stringify(Object.keys(r).sort().map((k) => (["duration", "timestamp"].includes(k) ? k : [k, r[k]])));
  if (same(mcpResult) !== same(execResult)) throw new Error(`the MCP result differs from exec's: ${same(mcpResult).slice(0, 300)} against ${same(execResult).slice(0, 300)}`);
  const runs = [];
  for (let i = 0; i < RUNS; i++) runs.push((await iteration(ctx, expected, ORDERS[i % ORDERS.length])).ms);
  const calls = WARMUP + RUNS;
  if (ctx.sdk.wire.requests - before !== calls) throw new Error(`the SDK sent ${ctx.sdk.wire.requests - before} requests for ${calls} calls`);
  const of = (way) => stats(runs.map((r) => r[way]));
  const added = (way, ref) => stats(runs.map((r) => r[way] - r[ref]));
  return {
    command: expected.command,
    stdoutBytes: Buffer.byteLength(expected.stdout),
    answerBytes: { mcp: Buffer.byteLength(last.answers.hand.text), exec: Buffer.byteLength(last.answers.exec) },
    encoding: { mcp: last.answers.hand.headers.get("content-encoding"), exec: await execEncoding(ctx.execUrl, expected.command) },
    sdkRequestsPerCall: (ctx.sdk.wire.requests - before) / calls,
    hand: of("hand"),
    sdk: of("sdk"),
    exec: of("exec"),
    // Iteration by iteration: one way's time less its reference's.
    added: { handOverExec: added("hand", "exec"), sdkOverHand: added("sdk", "hand"), sdkOverExec: added("sdk", "exec") },
  };
}

try {
  const sandboxd = await startSandboxd({ root: tempDir("bench-mcp-sandboxes") });
  cleanup.push(async () => { await sandboxd.stop(); fs.rmSync(sandboxd.root, { recursive: true, force: true }); });
  const persistDir = tempDir("bench-mcp");
  cleanup.push(() => fs.rmSync(persistDir, { recursive: true, force: true }));
  const w = await serveWorker({ vars: { SANDBOX_URL: sandboxd.url }, persistDir });
  cleanup.push(() => w.stop());
  const room = `bench-mcp-${Date.now()}`;
  const ctx = { mcpUrl: `${w.url}/api/rooms/${room}/mcp`, execUrl: `${w.url}/api/rooms/${room}/sandbox/exec`, id: 0 };
  // The room's first request: a tools/call with no initialize before it.
  const firstAnswer = await byHand(ctx.mcpUrl, ++ctx.id, COMMANDS.trivial.command);
  handResult(firstAnswer, ctx.id, COMMANDS.trivial);
  const stateless = { status: firstAnswer.status, contentType: firstAnswer.headers.get("content-type"), sessionId: firstAnswer.headers.get("mcp-session-id") };
  if (stateless.sessionId !== null) throw new Error(`a session was minted: ${stateless.sessionId}`);
  log(`a tools/call without initialize: ${stateless.status} ${stateless.contentType}, no session`);
  ctx.sdk = await connectSdk(ctx.mcpUrl);
  cleanup.push(() => ctx.sdk.client.close());
  log(`the SDK (${SDK_VERSION}) connected at ${ctx.sdk.version}: ${ctx.sdk.wire.connect.map((r) => `${r.http} ${r.method ?? ""} ${r.status}`).join(", ")}`);
  if (ctx.sdk.version !== PROTOCOL_VERSION) throw new Error(`the SDK negotiated ${ctx.sdk.version}, not ${PROTOCOL_VERSION}`);
  const commands = {};
  for (const key of Object.keys(COMMANDS)) {
    log(`${COMMANDS[key].command}: ${WARMUP} + ${RUNS} iterations`);
    loadavg(key);
    const c = (commands[key] = await measure(ctx, key));
    log(`${c.command}: by hand p50 ${c.hand.p50} / p99 ${c.hand.p99}, SDK ${c.sdk.p50} / ${c.sdk.p99}, exec ${c.exec.p50} / ${c.exec.p99} ms (answers ${c.answerBytes.mcp} B against ${c.answerBytes.exec} B)`);
  }
  loadavg("end");
  const section = {
    date: new Date().toISOString(),
    quick: QUICK,
    settings: { runs: RUNS, warmup: WARMUP, protocolVersion: PROTOCOL_VERSION, handHeaders: HAND_HEADERS, sdk: `@modelcontextprotocol/client ${SDK_VERSION}`, orders: ORDERS.map((o) => o.join(" ")) },
    load: loadavgs,
    stateless,
    sdkConnect: ctx.sdk.wire.connect,
    commands,
  };
  writeSection(out, { merge: Boolean(args.merge), key: "mcp", section });
  log(`wrote ${path.relative(ROOT, out)}`);
} finally {
  for (const f of cleanup.reverse()) await Promise.resolve(f()).catch(() => {});
}

// Starts the pieces an end-to-end test needs: the built Worker on workerd
// (through Miniflare, with real SQLite Durable Object storage) and a real
// sandboxd process. The Worker is configured from wrangler.toml, as
// `wrangler dev` configures it, so tests, benchmarks and development share
// one compatibility date and one set of bindings.
import { spawn } from "node:child_process";
import fs from "node:fs";
import http from "node:http";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

import { convertV4MiniflareOptions, Miniflare } from "miniflare";

import { startAiStandin } from "./ai-standin.mjs";
import { startFakeOpenAi } from "./fake-openai.mjs";
import { until } from "./wait.mjs";

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../..");

// Quiets wrangler's notes on reading the configuration (its logger reads this
// when loaded).
process.env.WRANGLER_LOG ??= "error";
const { unstable_getMiniflareWorkerOptions } = await import("wrangler");

export function tempDir(prefix) {
  return fs.mkdtempSync(path.join(os.tmpdir(), `duet-${prefix}-`));
}

export async function freePort() {
  const server = net.createServer();
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address();
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/**
 * The Worker's modules as worker-build writes them into `dir`; the page's
 * assets beside them (`page/`, scripts/page.mjs) are not modules.
 */
function builtModules(dir) {
  const modules = [{ type: "ESModule", path: path.join(dir, "index.js") }];
  for (const file of fs.readdirSync(dir, { recursive: true }).sort()) {
    const full = path.join(dir, file);
    if (full === modules[0].path || file.split(path.sep)[0] === "page" || !fs.statSync(full).isFile()) continue;
    if (/\.(m?js)$/.test(file)) modules.push({ type: "ESModule", path: full });
    else if (file.endsWith(".wasm")) modules.push({ type: "CompiledWasm", path: full });
  }
  return modules;
}

/**
 * The paths of the page's assets as scripts/page.mjs wrote them
 * (`/assets/duet.0123456789.js`), by the names the page's files use
 * (`duet.js`).
 */
export function pageAssets(buildDir = path.join(ROOT, "build")) {
  const files = fs.readdirSync(path.join(buildDir, "page/assets"));
  return Object.fromEntries(files.map((f) => [f.replace(/\.[0-9a-f]{10}(\.\w+)$/, "$1"), `/assets/${f}`]));
}

/**
 * The built worker on workerd, configured from wrangler.toml.
 * ai: "standin" (workerd's Workers AI binding, reaching the scripted service
 * of ./ai-standin.mjs), "local" (the binding as `wrangler dev --local` gives
 * it, which only throws) or "none".
 * container: { socketPath, imageName, egressImage? } gives the Sandbox object
 * a container of `imageName`, run by the Docker Engine API on the unix socket
 * `socketPath` (e.g. the stand-in of ./fake-docker.mjs); `egressImage` names
 * workerd's egress interceptor (sidecar) image.
 * access: DUET_ACCESS, "open" by default, as `npm run dev` runs (the
 * shipped wrangler.toml says "token"); null keeps wrangler.toml's.
 * buildDir: where the built worker is (default build/).
 * inspectorPort: serves workerd's V8 inspector there (bench/profile.mjs).
 * standin: options of the Workers AI stand-in (e.g. `tokenMs`, its pace).
 */
export async function startWorker({ ai = "standin", vars = {}, access = "open", persistDir = tempDir("state"), container, buildDir = path.join(ROOT, "build"), inspectorPort, standin: standinOptions } = {}) {
  // Containers off here: wrangler would build the Dockerfile's image; a
  // test names a ready image instead.
  const { workerOptions } = unstable_getMiniflareWorkerOptions(path.join(ROOT, "wrangler.toml"), undefined, {
    overrides: { enableContainers: false },
  });
  const standin = ai === "standin" ? await startAiStandin(standinOptions) : undefined;
  const worker = {
    ...workerOptions,
    name: "duet",
    modulesRules: undefined,
    modules: builtModules(buildDir),
    modulesRoot: buildDir,
    bindings: { ...workerOptions.bindings, ...(access === null ? {} : { DUET_ACCESS: access }), ...vars },
    ai: ai === "none" ? undefined : { binding: "AI", remoteProxyConnectionString: standin && new URL(standin.url) },
  };
  if (container) worker.durableObjects.Sandbox.container = { imageName: container.imageName };
  // Port 0: workerd binds a free port itself, which `mf.ready` answers. A
  // port found free beforehand can be taken, before workerd binds it, as
  // the source port of any outgoing connection on this machine.
  const options = convertV4MiniflareOptions({ host: "127.0.0.1", port: 0, workers: [worker] });
  if (container) {
    // workerd wants "unix://" + an absolute path.
    const socketPath = /^[a-z-]+:/.test(container.socketPath) ? container.socketPath : `unix://${container.socketPath}`;
    options.containerEngine = { localDocker: { socketPath } };
    if (container.egressImage) options.containerEngine.localDocker.containerEgressInterceptorImage = container.egressImage;
  }
  // The worker's log lines, one JSON object per request and per failure.
  const logs = [];
  const mf = new Miniflare({
    ...options,
    logRequests: false,
    inspectorPort,
    resourcePersistencePath: persistDir,
    handleStructuredLogs: ({ message }) => logs.push(...message.split("\n").filter((line) => line.trim())),
  });
  let url;
  try {
    url = (await mf.ready).toString().replace(/\/$/, "");
  } catch (e) {
    // Disposed, or its loopback server would keep the test process alive.
    await mf.dispose().catch(() => {});
    await standin?.close();
    throw e;
  }
  return {
    url,
    persistDir,
    logs,
    ai: standin,
    api: client(url),
    /** Evicts a Durable Object, hibernating its WebSockets, as the runtime does to an idle one. */
    evict: (className, name) => mf.unsafeEvictDurableObject("duet", className, { name, webSockets: "hibernate" }),
    stop: async () => {
      await mf.dispose();
      await standin?.close();
    },
  };
}

/**
 * A real sandboxd on loopback, built by `cargo build --release -p sandboxd`.
 * `args` are extra sandboxd options; `wrap` is a command line to run it
 * under (e.g. one that drops privileges). Resolves once /health answers.
 * With SANDBOX_URL in the environment (scripts/image-check sets it), a call
 * without options gets the sandboxd running there instead, whose `--root`
 * is SANDBOX_ROOT as seen from here; `stop` leaves it to whoever started it.
 */
export async function startSandboxd(options = {}) {
  if (process.env.SANDBOX_URL) return runningSandboxd(options);
  const { root = tempDir("sandboxes"), args = [], wrap = [] } = options;
  const port = options.port ?? (await freePort());
  const argv = [...wrap, path.join(ROOT, "target/release/sandboxd"), "--listen", `127.0.0.1:${port}`, "--root", root, ...args];
  // A minimal environment, as in production: commands can read sandboxd's.
  const child = spawn(argv[0], argv.slice(1), { stdio: ["ignore", "ignore", "pipe"], env: { PATH: process.env.PATH } });
  let stderr = ""; // one line per command; kept only to explain a failed start
  child.stderr.on("data", (chunk) => {
    stderr = (stderr + chunk).slice(-4000);
  });
  const exited = new Promise((resolve) => child.once("exit", resolve));
  const url = `http://127.0.0.1:${port}`;
  const gone = () => child.exitCode !== null && `sandboxd exited: ${stderr}`;
  await until(() => `sandboxd at ${url} to answer /health: ${stderr}`, () => healthy(url, gone), HEALTH_MS, { every: 50 });
  return {
    url,
    root,
    port,
    child,
    stop: async (signal = "SIGTERM") => {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      const timer = setTimeout(() => child.kill("SIGKILL"), 8000);
      await exited;
      clearTimeout(timer);
    },
  };
}

/** The sandboxd at SANDBOX_URL; a test that needs options of its own cannot use it. */
async function runningSandboxd(options) {
  const asked = Object.keys(options);
  if (asked.length > 0) throw new Error(`this test starts sandboxd with its own ${asked.join(", ")}: it cannot use the one at SANDBOX_URL`);
  const url = process.env.SANDBOX_URL.replace(/\/$/, "");
  await until(`sandboxd at ${url} to answer /health`, () => healthy(url), HEALTH_MS, { every: 50 });
  return { url, root: process.env.SANDBOX_ROOT, port: Number(new URL(url).port), stop: async () => {} };
}

/** How long a sandboxd may take to answer /health once started. */
const HEALTH_MS = 10_000;

/**
 * Whether `${url}/health` answers 200 (each try at most 1 s). `failed()`
 * names why to stop waiting at once, or answers something falsy.
 */
async function healthy(url, failed = () => undefined) {
  const failure = failed();
  if (failure) throw new Error(failure);
  try {
    return (await fetch(`${url}/health`, { signal: AbortSignal.timeout(1000) })).ok;
  } catch {
    return false; // not answering yet
  }
}

/**
 * The worker with a real sandboxd behind SANDBOX_URL: `{ sandboxd, worker,
 * stop }`. `sandboxd` takes startSandboxd's options; the rest startWorker's.
 */
export async function startStack({ sandboxd: sandboxdOptions = {}, vars = {}, ...options } = {}) {
  const sandboxd = await startSandboxd(sandboxdOptions);
  const worker = await startWorker({ ...options, vars: { SANDBOX_URL: sandboxd.url, ...vars } });
  return {
    sandboxd,
    worker,
    stop: async () => {
      await worker.stop();
      await sandboxd.stop();
    },
  };
}

/** JSON-over-HTTP calls that return status, headers, parsed body and raw text. */
export function client(base, defaultHeaders = {}) {
  return async function api(method, route, body, headers = {}) {
    const init = { method, headers: { ...defaultHeaders, ...headers } };
    if (body !== undefined) {
      init.body = typeof body === "string" || body instanceof Uint8Array ? body : JSON.stringify(body);
      init.headers["content-type"] ??= "application/json";
    }
    const res = await fetch(base + route, init);
    return answer(res.status, res.headers, await res.text());
  };
}

/**
 * Like a `client` call, but on a connection of its own that ends with it.
 * For a body the worker refuses unread (413): the runtime then ends the
 * connection, and fetch's pool could hand that connection to the next
 * request before it sees it end, which fails that request.
 */
export function alone(base, method, route, body, headers = {}) {
  const payload = typeof body === "string" ? body : JSON.stringify(body);
  const init = { method, agent: false, headers: { "content-type": "application/json", ...headers, connection: "close" } };
  return new Promise((resolve, reject) => {
    const req = http.request(base + route, init, (res) => {
      const chunks = [];
      res.on("data", (chunk) => chunks.push(chunk));
      res.on("end", () => resolve(answer(res.statusCode, new Headers(res.headers), Buffer.concat(chunks).toString())));
      res.on("error", reject);
    });
    // The connection may end before the body is all written; once the
    // answer has come, that is no failure (a settled promise stays so).
    req.on("error", reject);
    req.end(payload);
  });
}

function answer(status, headers, text) {
  let json;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status, headers, text, json };
}

/** Asserts the shape the Go server decodes: integer ts, roles, optional userId. */
export function assertMessages(assert, messages) {
  assert.ok(Array.isArray(messages));
  for (const m of messages) {
    assert.ok(m.role === "user" || m.role === "agent", `role ${m.role}`);
    assert.equal(typeof m.text, "string");
    assert.ok(Number.isSafeInteger(m.ts) && m.ts > 1.7e12, `ts ${m.ts}`);
    if ("userId" in m) assert.equal(typeof m.userId, "string");
  }
}

/**
 * A worker with a sandboxd and one of the two AI backends: "workers-ai"
 * (the stand-in behind the binding, with the default model) or "openai" (a
 * local OpenAI-compatible server, asked for `model`). `vars` are the
 * worker's on either; `openaiVars` only on "openai"; `tokenMs` paces
 * either backend's stream. `inputs(since)` are the model's inputs from call
 * `since` on, oldest first; `callCount()` how many calls it has had.
 */
export async function startAgentStack(backend, { vars = {}, openaiVars = {}, model = "local-model", tokenMs } = {}) {
  const sandboxd = await startSandboxd();
  const all = { SANDBOX_URL: sandboxd.url, ...vars };
  let ai, worker;
  if (backend === "openai") {
    ai = await startFakeOpenAi({ tokenMs });
    worker = await startWorker({ ai: "local", vars: { ...all, ...openaiVars, AI_BASE_URL: ai.url, AI_MODEL: model } });
  } else {
    worker = await startWorker({ vars: all, standin: { tokenMs } });
  }
  const inputs = () => (ai ? ai.requests.map((r) => r.body) : worker.ai.requests.map((r) => r.inputs));
  return {
    worker,
    ai,
    inputs: (since = 0) => inputs().slice(since),
    callCount: () => inputs().length,
    async stop() {
      await worker.stop();
      await sandboxd.stop();
      await ai?.close();
    },
  };
}

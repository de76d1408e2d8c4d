// Starts the pieces an end-to-end test needs: the built Worker on workerd
// (through Miniflare, with real SQLite Durable Object storage) and a real
// sandboxd process.
import { spawn } from "node:child_process";
import fs from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

import { Miniflare } from "miniflare";

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../..");
const COMPATIBILITY_DATE = "2026-04-01";

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
 * The built worker on workerd.
 * ai: "standin" (scripted Workers AI binding), "local" (the binding as
 * `wrangler dev --local` gives it, which only throws) or "none".
 * container: { socketPath, imageName, egressImage? } gives the Sandbox object
 * a container of `imageName`, run by the Docker Engine API on the unix socket
 * `socketPath` (e.g. the stand-in of ./fake-docker.mjs); `egressImage` names
 * workerd's egress interceptor (sidecar) image.
 */
export async function startWorker({ ai = "standin", vars = {}, persistDir = tempDir("state"), container } = {}) {
  const worker = {
    name: "duet",
    modules: true,
    scriptPath: path.join(ROOT, "build/index.js"),
    modulesRoot: path.join(ROOT, "build"),
    modulesRules: [{ type: "CompiledWasm", include: ["**/*.wasm"], fallthrough: true }],
    compatibilityDate: COMPATIBILITY_DATE,
    durableObjects: {
      DUET_AGENT: { className: "DuetAgent", useSQLite: true },
      Sandbox: { className: "Sandbox", useSQLite: true },
    },
    bindings: vars,
  };
  if (container) {
    worker.durableObjects.Sandbox.container = { imageName: container.imageName };
    // A per-worker option in Miniflare; workerd wants "unix://" + an absolute path.
    const socketPath = /^[a-z-]+:/.test(container.socketPath) ? container.socketPath : `unix://${container.socketPath}`;
    worker.containerEngine = { localDocker: { socketPath } };
    if (container.egressImage) worker.containerEngine.localDocker.containerEgressInterceptorImage = container.egressImage;
  }
  const workers = [worker];
  if (ai === "standin") {
    worker.wrappedBindings = { AI: { scriptName: "ai-standin" } };
    workers.push({
      name: "ai-standin",
      modules: [{ type: "ESModule", path: "ai-standin.mjs", contents: fs.readFileSync(new URL("./ai-standin.mjs", import.meta.url), "utf8") }],
    });
  } else if (ai === "local") {
    worker.ai = { binding: "AI" };
  }
  // The worker's log lines, one JSON object per request and per failure.
  const logs = [];
  const collect = (stream) => {
    let partial = "";
    stream.on("data", (chunk) => {
      const lines = (partial + chunk).split("\n");
      partial = lines.pop();
      logs.push(...lines.filter((line) => line.trim()));
    });
  };
  const mf = new Miniflare({
    workers,
    host: "127.0.0.1",
    port: await freePort(),
    durableObjectsPersist: persistDir,
    handleRuntimeStdio: (stdout, stderr) => {
      collect(stdout);
      collect(stderr);
    },
  });
  const url = (await mf.ready).toString().replace(/\/$/, "");
  return { url, persistDir, logs, api: client(url), stop: () => mf.dispose() };
}

/**
 * A real sandboxd on loopback, built by `cargo build --release -p sandboxd`.
 * `args` are extra sandboxd options; `wrap` is a command line to run it
 * under (e.g. one that drops privileges). Resolves once /health answers.
 */
export async function startSandboxd({ root = tempDir("sandboxes"), port, args = [], wrap = [] } = {}) {
  port ??= await freePort();
  const argv = [...wrap, path.join(ROOT, "target/release/sandboxd"), "--listen", `127.0.0.1:${port}`, "--root", root, ...args];
  const child = spawn(argv[0], argv.slice(1), { stdio: ["ignore", "ignore", "pipe"] });
  let stderr = ""; // one line per command; kept only to explain a failed start
  child.stderr.on("data", (chunk) => {
    stderr = (stderr + chunk).slice(-4000);
  });
  const exited = new Promise((resolve) => child.once("exit", resolve));
  const url = `http://127.0.0.1:${port}`;
  for (let i = 0; ; i++) {
    if (child.exitCode !== null) throw new Error(`sandboxd exited: ${stderr}`);
    try {
      if ((await fetch(`${url}/health`)).ok) break;
    } catch {
      if (i > 200) throw new Error(`sandboxd did not start: ${stderr}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }
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

/** JSON-over-HTTP calls that return status, headers, parsed body and raw text. */
export function client(base, defaultHeaders = {}) {
  return async function api(method, route, body, headers = {}) {
    const init = { method, headers: { ...defaultHeaders, ...headers } };
    if (body !== undefined) {
      init.body = typeof body === "string" || body instanceof Uint8Array ? body : JSON.stringify(body);
      init.headers["content-type"] ??= "application/json";
    }
    const res = await fetch(base + route, init);
    const text = await res.text();
    let json;
    try {
      json = JSON.parse(text);
    } catch {
      json = undefined;
    }
    return { status: res.status, headers: res.headers, text, json };
  };
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

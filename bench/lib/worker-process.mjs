// The parent's side of lib/serve-worker.mjs: a worker on workerd in a
// process of its own, so that the load generator does not share an event
// loop with Miniflare (and the AI stand-in it starts).
import { fork } from "node:child_process";
import path from "node:path";

import { ROOT } from "../../tests/e2e/support/stack.mjs";
import { bounded } from "./load.mjs";

/**
 * Serves the worker in `buildDir` (default build/) with `vars`, its state in
 * `persistDir`; `standin` are the AI stand-in's options (e.g. `tokenMs`);
 * `container` is startWorker's (a Docker engine for the Sandbox object).
 * Resolves to {url, aiUrl, pid, lastAiRequest, stop}: `aiUrl` is the
 * stand-in's own address, `lastAiRequest()` what the worker last asked it.
 */
export async function serveWorker({ vars = {}, persistDir, buildDir, standin, container } = {}) {
  const child = fork(path.join(ROOT, "bench/lib/serve-worker.mjs"), [], {
    env: {
      ...process.env,
      BENCH_VARS: JSON.stringify(vars),
      BENCH_PERSIST: persistDir ?? "",
      BENCH_BUILD_DIR: buildDir ?? "",
      BENCH_STANDIN: JSON.stringify(standin ?? {}),
      BENCH_CONTAINER: container ? JSON.stringify(container) : "",
    },
    stdio: ["ignore", "ignore", "inherit", "ipc"],
  });
  const exited = new Promise((r) => child.once("exit", r));
  const failed = exited.then(() => { throw new Error("worker host exited"); });
  failed.catch(() => {}); // only a wait below reports it
  // Each wait for the host is bounded: a start within a minute, a reply within seconds.
  const answer = (ms, what) => bounded(Promise.race([new Promise((r) => child.once("message", r)), failed]), ms, `the worker host (${what})`);
  const { url, aiUrl } = await answer(60_000, "its start").catch((e) => { child.kill(); throw e; });
  return {
    url,
    aiUrl,
    pid: child.pid,
    lastAiRequest: async () => {
      const reply = answer(5000, "its last AI request");
      child.send("last-ai-request");
      return (await reply).aiRequest;
    },
    stop: async () => {
      if (child.connected) child.send("stop");
      await Promise.race([exited, new Promise((r) => setTimeout(r, 5000))]);
      child.kill();
    },
  };
}

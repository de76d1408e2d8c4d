// Serves the built worker (stack.mjs's startWorker) in a process of its own,
// so that the load generator and Miniflare's handling of workerd's output do
// not share an event loop (lib/worker-process.mjs starts it). Sends {url,
// aiUrl} over IPC; answers "last-ai-request" with {aiRequest}, what the
// worker last asked the AI stand-in; stops on "stop" or when the parent goes
// away. BENCH_BUILD_DIR serves another worker (e.g. bench/reference/) with
// the same bindings; the default is build/. BENCH_STANDIN holds the
// stand-in's options (e.g. its pace, `tokenMs`), BENCH_CONTAINER the
// container option (a Docker engine for the Sandbox object), if any.
import { startWorker } from "../../tests/e2e/support/stack.mjs";

const w = await startWorker({
  vars: JSON.parse(process.env.BENCH_VARS || "{}"),
  persistDir: process.env.BENCH_PERSIST || undefined,
  buildDir: process.env.BENCH_BUILD_DIR || undefined,
  standin: JSON.parse(process.env.BENCH_STANDIN || "{}"),
  container: process.env.BENCH_CONTAINER ? JSON.parse(process.env.BENCH_CONTAINER) : undefined,
});
let stopping = false;
const stop = async () => {
  if (stopping) return;
  stopping = true;
  await w.stop().catch(() => {});
  process.exit(0);
};
process.on("message", (m) => {
  if (m === "stop") stop();
  else if (m === "last-ai-request") process.send({ aiRequest: w.ai?.requests.at(-1) ?? null });
});
process.on("disconnect", stop);
process.send({ url: w.url, aiUrl: w.ai?.url ?? null });

// Serves the built worker (stack.mjs's startWorker) in a process of its own,
// so that the load generator and Miniflare's handling of workerd's output do
// not share an event loop. Sends {url} over IPC; stops on "stop" or when the
// parent goes away. BENCH_BUILD_DIR serves another worker (e.g.
// bench/reference/) with the same bindings; the default is build/.
import { startWorker } from "../../tests/e2e/support/stack.mjs";

const w = await startWorker({
  vars: JSON.parse(process.env.BENCH_VARS ?? "{}"),
  persistDir: process.env.BENCH_PERSIST,
  buildDir: process.env.BENCH_BUILD_DIR || undefined,
});
let stopping = false;
const stop = async () => {
  if (stopping) return;
  stopping = true;
  await w.stop().catch(() => {});
  process.exit(0);
};
process.on("message", (m) => m === "stop" && stop());
process.on("disconnect", stop);
process.send({ url: w.url });

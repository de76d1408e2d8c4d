// The local stack the contract tests run against: the built worker on workerd
// (Miniflare, scripted Workers AI stand-in) and a sandboxd it reaches through
// SANDBOX_URL. Prints the worker's URL on stdout, then runs until SIGTERM or
// SIGINT, when it stops both and removes their temporary directories.
//
// The fuzzer's `cmd` strings really run in bash, so when this runs as root
// sandboxd runs as nobody (no supplementary groups, no new privileges) with
// bounded file size and process count, in a workspace directory it owns.
//
// Environment: DUET_API_TOKEN (optional) is passed to the worker as its token;
// CONTRACT_AI_TIMEOUT_MS (default 2000) bounds the stand-in's "stall".
import fs from "node:fs";

import { startSandboxd, startWorker, tempDir } from "../e2e/support/stack.mjs";

const NOBODY = 65534;

function log(line) {
  process.stderr.write(`stack: ${line}\n`);
}

async function startConfinedSandboxd() {
  const root = tempDir("contract-sandboxes");
  if (process.getuid?.() !== 0) return startSandboxd({ root });
  fs.chownSync(root, NOBODY, NOBODY);
  fs.chmodSync(root, 0o700);
  const wrap = [
    "setpriv", `--reuid=${NOBODY}`, `--regid=${NOBODY}`, "--clear-groups", "--no-new-privs", "--",
    "prlimit", "--fsize=67108864", "--nproc=256", "--nofile=1024", "--",
  ];
  return startSandboxd({ root, wrap });
}

const sandboxd = await startConfinedSandboxd();
const vars = {
  SANDBOX_URL: sandboxd.url,
  AI_TIMEOUT_MS: process.env.CONTRACT_AI_TIMEOUT_MS || "2000",
};
if (process.env.DUET_API_TOKEN) vars.DUET_API_TOKEN = process.env.DUET_API_TOKEN;
let worker;
try {
  worker = await startWorker({ vars, persistDir: tempDir("contract-state") });
} catch (e) {
  await sandboxd.stop();
  fs.rmSync(sandboxd.root, { recursive: true, force: true });
  throw e;
}
log(`sandboxd ${sandboxd.url} (root ${sandboxd.root}), worker ${worker.url}`);
process.stdout.write(`${worker.url}\n`);

let stopping = false;
async function stop() {
  if (stopping) return;
  stopping = true;
  log("stopping");
  await Promise.allSettled([worker.stop(), sandboxd.stop()]);
  for (const dir of [worker.persistDir, sandboxd.root]) fs.rmSync(dir, { recursive: true, force: true });
  process.exit(0);
}
// Miniflare's own SIGTERM/SIGINT listeners exit at once (killing workerd),
// which would leave sandboxd and its shells running: this process handles the
// signals instead. Miniflare's "exit" listener still kills workerd whatever
// happens.
for (const signal of ["SIGTERM", "SIGINT"]) {
  process.removeAllListeners(signal);
  process.on(signal, stop);
}
// Stop too when whoever started this goes away without stopping it.
const parent = process.ppid;
setInterval(() => {
  if (process.ppid !== parent) stop();
}, 1000);

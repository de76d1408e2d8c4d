// Serves the worker built in $BUILD_DIR on workerd (the end-to-end tests'
// set-up, tests/e2e/support/stack.mjs) and checks that /health and one
// /message answer. Prints "ok" or what failed.
import fs from "node:fs";
import path from "node:path";
import { startWorker } from "../../tests/e2e/support/stack.mjs";

const worker = await startWorker({ buildDir: path.resolve(process.env.BUILD_DIR ?? "build") });
try {
  const health = await fetch(`${worker.url}/health`);
  const healthText = await health.text();
  const msg = await worker.api("POST", "/api/rooms/smoke/message", { text: "hello" });
  if (health.status === 200 && healthText === "ok" && msg.status === 200 && msg.json.reply === "echo: hello") console.log("ok");
  else console.log(`failed: /health ${health.status}, /message ${msg.status} ${msg.text.slice(0, 200)}`);
} finally {
  await worker.stop();
  fs.rmSync(worker.persistDir, { recursive: true, force: true });
}

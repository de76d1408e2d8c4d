// Serves the worker built in $BUILD_DIR on workerd (the same Miniflare set-up
// as tests/e2e/support/stack.mjs, which always serves build/) and checks that
// /health and one /message answer. Prints "ok" or what failed.
import fs from "node:fs";
import path from "node:path";
import { Miniflare } from "miniflare";
import { freePort, tempDir } from "../../tests/e2e/support/stack.mjs";

const dir = path.resolve(process.env.BUILD_DIR ?? "build");
const standin = new URL("../../tests/e2e/support/ai-standin.mjs", import.meta.url);
const persist = tempDir("smoke");
const mf = new Miniflare({
  workers: [
    {
      name: "duet",
      modules: true,
      scriptPath: path.join(dir, "index.js"),
      modulesRoot: dir,
      modulesRules: [{ type: "CompiledWasm", include: ["**/*.wasm"], fallthrough: true }],
      compatibilityDate: "2026-04-01",
      durableObjects: { DUET_AGENT: { className: "DuetAgent", useSQLite: true }, Sandbox: { className: "Sandbox", useSQLite: true } },
      wrappedBindings: { AI: { scriptName: "ai-standin" } },
    },
    { name: "ai-standin", modules: [{ type: "ESModule", path: "ai-standin.mjs", contents: fs.readFileSync(standin, "utf8") }] },
  ],
  host: "127.0.0.1",
  port: await freePort(),
  durableObjectsPersist: persist,
});
try {
  const url = (await mf.ready).toString().replace(/\/$/, "");
  const health = await fetch(`${url}/health`);
  const healthText = await health.text();
  const msg = await fetch(`${url}/api/rooms/smoke/message`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ text: "hello" }) });
  const body = await msg.json();
  if (health.status === 200 && healthText === "ok" && msg.status === 200 && body.reply === "echo: hello") console.log("ok");
  else console.log(`failed: /health ${health.status}, /message ${msg.status} ${JSON.stringify(body).slice(0, 200)}`);
} finally {
  await mf.dispose();
  fs.rmSync(persist, { recursive: true, force: true });
}

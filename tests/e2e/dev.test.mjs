// The README's run command, as a newcomer would use it: `npm run dev` builds
// the worker and the page, starts sandboxd and serves everything on
// localhost:8788.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { test } from "node:test";

import { startFakeOpenAi } from "./support/fake-openai.mjs";
import { client, freePort, ROOT } from "./support/stack.mjs";
import { until } from "./support/wait.mjs";

const BASE = "http://127.0.0.1:8788";

/** Whether `npm run dev` serves /health yet; throws once it has exited. */
async function healthy(child) {
  if (child.exitCode !== null) throw new Error(`npm run dev exited with ${child.exitCode}`);
  try {
    return (await fetch(`${BASE}/health`)).ok;
  } catch {
    return false; // not listening yet
  }
}

test("npm run dev serves health, exec, chat with <run> tags, the page and cleanup on :8788", { timeout: 400_000 }, async () => {
  const ai = await startFakeOpenAi();
  const child = spawn("npm", ["run", "dev", "--", "--var", `AI_BASE_URL:${ai.url}`, "--var", "AI_MODEL:local-model"], {
    cwd: ROOT,
    env: { ...process.env, SANDBOX_PORT: String(await freePort()) },
    stdio: ["ignore", "ignore", "pipe"],
    detached: true,
  });
  let stderr = "";
  child.stderr.on("data", (d) => (stderr += d));
  const exited = new Promise((resolve) => child.once("exit", resolve));
  try {
    await until("npm run dev to serve /health", () => healthy(child), 360_000, { every: 500 });
    const api = client(BASE);
    const exec = await api("POST", "/api/rooms/dev-room/sandbox/exec", { cmd: "echo from-dev" });
    assert.equal(exec.status, 200, exec.text);
    assert.equal(exec.json.result.stdout, "from-dev\n");
    const chat = await api("POST", "/api/rooms/dev-room/message", { text: "raw Here.<run>echo chat-ran</run>" });
    assert.equal(chat.status, 200, chat.text);
    assert.equal(chat.json.reply, "Here.\n\nOutput (echo chat-ran):\nchat-ran\n\nDone.");
    assert.equal(ai.requests.at(-1).body.model, "local-model");
    // The page, from the assets the build wrote.
    const page = await fetch(`${BASE}/rooms/dev-room`);
    assert.equal(page.status, 200);
    const script = (await page.text()).match(/\/assets\/duet\.[0-9a-f]{10}\.js/)?.[0];
    assert.equal((await fetch(BASE + script)).headers.get("cache-control"), "public, max-age=31536000, immutable");
    const cleanup = await api("DELETE", "/api/rooms/dev-room");
    assert.deepEqual(cleanup.json, { cleaned: true, roomId: "dev-room" });
  } catch (e) {
    e.message += `\n--- npm run dev stderr ---\n${stderr.slice(-3000)}`;
    throw e;
  } finally {
    try {
      process.kill(-child.pid, "SIGTERM");
    } catch (e) {
      // The whole group is gone already: it exited by itself, and the error above says why.
      if (e.code !== "ESRCH") throw e;
    }
    await exited;
    await ai.close();
  }
});

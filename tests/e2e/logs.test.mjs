// Structured logs: one JSON line per request with room, route, status and
// duration; failures with their cause; never a secret, a message text or a
// command's output.
import assert from "node:assert/strict";
import { test } from "node:test";

import { client, startSandboxd, startWorker } from "./support/stack.mjs";
import { sleep } from "./support/wait.mjs";

test("one JSON line per request, causes of errors, nothing private", async () => {
  const token = "tok-9f8e7d6c5b4a";
  const sandboxd = await startSandboxd();
  const worker = await startWorker({ vars: { SANDBOX_URL: sandboxd.url, DUET_API_TOKEN: token, AI_TIMEOUT_MS: "1000" } });
  const api = client(worker.url, { authorization: `Bearer ${token}` });
  try {
    await api("GET", "/health");
    await api("POST", "/api/rooms/log-room/message", { text: "private-message-text" });
    await api("POST", "/api/rooms/log-room/sandbox/exec", { cmd: "echo private-output-$((6*7))" });
    await api("POST", "/api/rooms/log-room/message", { text: "stall" });
    await api("POST", "/api/rooms/log-room/message", { text: "raw <run>echo agent-$((40+2))-output</run>" });
    await api("POST", "/api/rooms/log-room/message", { text: 5 });
    await client(worker.url)("GET", "/api/rooms/log-room/messages");
    await sleep(200); // let the last lines arrive

    const lines = worker.logs.filter((line) => line.startsWith("{")).map((line) => JSON.parse(line));
    const requests = lines.filter((l) => "route" in l);
    assert.deepEqual(
      requests.map((l) => [l.method, l.route, l.status]),
      [["GET", "health", 200], ["POST", "message", 200], ["POST", "exec", 200], ["POST", "message", 504], ["POST", "message", 200], ["POST", "message", 400], ["GET", "history", 401]],
    );
    for (const l of requests) {
      assert.ok(Number.isInteger(l.durationMs) && l.durationMs >= 0);
      if (l.route !== "health") assert.equal(l.room, "log-room");
    }
    assert.match(requests[6].error, /bearer token/);
    const failures = lines.filter((l) => "object" in l);
    assert.ok(failures.some((l) => l.object === "DuetAgent" && l.status === 504 && /did not answer within 1000 ms/.test(l.error)));
    assert.ok(failures.some((l) => l.object === "DuetAgent" && l.status === 400 && l.path === "/api/rooms/log-room/message"));

    const all = worker.logs.join("\n");
    for (const secret of [token, "private-message-text", "private-output-42", "agent-42-output"]) {
      assert.ok(!all.includes(secret), `the logs contain ${secret}`);
    }
  } finally {
    await worker.stop();
    await sandboxd.stop();
  }
});

// The JavaScript reference (bench/reference/) answers as the Rust worker
// does, so that bench/compare.mjs compares like with like. Both are served
// on workerd by stack.mjs with wrangler.toml's bindings, each with its own
// scripted AI stand-in, sharing one sandboxd, with bearer-token auth on.
// Every answer streams; the default model is offered the run_command tool.
//
//   node --test bench/compare.test.mjs
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { after, before, test } from "node:test";

import { client, ROOT, startSandboxd, startWorker, tempDir } from "../tests/e2e/support/stack.mjs";
import { compareAnswers, errorText } from "./lib/compare-smoke.mjs";

const TOKEN = "t0ken-for-the-smoke";
let sandboxd, rust, js;

/** `text` without process ids: bash names a command killed at its time limit by its own. */
const withoutPids = (text) => text.replace(/\d+ Killed/g, "<pid> Killed");

before(async () => {
  sandboxd = await startSandboxd({ root: tempDir("compare-smoke") });
  const vars = { SANDBOX_URL: sandboxd.url, DUET_API_TOKEN: TOKEN };
  rust = await startWorker({ vars });
  js = await startWorker({ vars, buildDir: path.join(ROOT, "bench/reference") });
});

after(async () => {
  for (const w of [rust, js]) {
    await w?.stop();
    if (w) fs.rmSync(w.persistDir, { recursive: true, force: true });
  }
  await sandboxd?.stop();
  if (sandboxd) fs.rmSync(sandboxd.root, { recursive: true, force: true });
});

test("both workers give the same answers", async () => {
  const { requests, differences } = await compareAnswers({ rust: rust.url, js: js.url }, { token: TOKEN });
  assert.deepEqual(differences, [], JSON.stringify(differences, null, 1));
  assert.ok(requests > 30);
});

test("both workers call the tool, stream and cut answers alike", async () => {
  // Tool calls (one, two at once, malformed ones, one with its own time
  // limit), <run> tags beside the tool, a long streamed answer, one cut off
  // mid-way and a model that throws; the inputs these send are compared below.
  const texts = ["tool echo hi-there", "tools echo one ;; echo two", "badtool", "tool-timeout 1000 sleep 5", "tagged echo by-tag", "long 300", "cut half an answer", "fail"];
  const room = `/api/rooms/tools-${Date.now()}`;
  const answers = {};
  for (const [name, w] of Object.entries({ rust, js })) {
    const api = client(w.url, { authorization: `Bearer ${TOKEN}` });
    answers[name] = [];
    for (const text of texts) {
      const res = await api("POST", `${room}/message`, { text });
      answers[name].push([text, res.status, withoutPids(res.json?.reply ?? res.text)]);
    }
    await api("DELETE", room);
  }
  assert.deepEqual(answers.js, answers.rust);
  const reply = (text) => answers.rust.find(([t]) => t === text)[2];
  assert.equal(reply("tool echo hi-there"), "Let me check.\n\nOutput (echo hi-there):\nhi-there\n\nsaw: hi-there");
  assert.match(reply("badtool"), /^recovered: \["error: the arguments of run_command are not a JSON object",/);
  assert.match(reply("cut half an answer"), /^half an answer\n\n\[The model's answer was cut off \(its stream/);
  assert.deepEqual(answers.rust.at(-1).slice(0, 2), ["fail", 503]);
});

test("both workers ask the model the same thing", () => {
  assert.ok(rust.ai.requests.length > 10);
  const asked = (w) => JSON.parse(withoutPids(JSON.stringify(w.ai.requests)));
  assert.deepEqual(asked(js), asked(rust));
  assert.deepEqual(Object.keys(rust.ai.requests[0].inputs).sort(), ["chat_template_kwargs", "max_completion_tokens", "messages", "stream", "tools"]);
  assert.ok(rust.ai.requests.some((r) => r.inputs.messages.some((m) => m.role === "tool")), "tool turns were compared");
  assert.equal(rust.ai.requests[0].model, "@cf/zai-org/glm-4.7-flash");
});

test("both workers log one line per request, of the same shape", () => {
  const lines = (w) => w.logs.map((l) => { try { return JSON.parse(l); } catch { return null; } }).filter((l) => l && "route" in l);
  const shape = (l) => ({ ...l, durationMs: typeof l.durationMs, error: l.error === undefined ? undefined : errorText(l.error) });
  assert.deepEqual(lines(js).map(shape), lines(rust).map(shape));
});

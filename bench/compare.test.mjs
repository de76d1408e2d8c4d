// The JavaScript reference (bench/reference/) answers as the Rust worker
// does, so that bench/compare.mjs compares like with like. Both are served
// on workerd by stack.mjs with wrangler.toml's bindings, each with its own
// scripted AI stand-in, sharing one sandboxd, with bearer-token auth on.
//
//   node --test bench/compare.test.mjs
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { after, before, test } from "node:test";

import { ROOT, startSandboxd, startWorker, tempDir } from "../tests/e2e/support/stack.mjs";
import { compareAnswers, errorText } from "./lib/compare-smoke.mjs";

const TOKEN = "t0ken-for-the-smoke";
let sandboxd, rust, js;

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

test("both workers ask the model the same thing", () => {
  assert.ok(rust.ai.requests.length > 10);
  assert.deepEqual(js.ai.requests, rust.ai.requests);
  assert.deepEqual(Object.keys(rust.ai.requests[0].inputs).sort(), ["chat_template_kwargs", "max_completion_tokens", "messages"]);
  assert.equal(rust.ai.requests[0].model, "@cf/zai-org/glm-4.7-flash");
});

test("both workers log one line per request, of the same shape", () => {
  const lines = (w) => w.logs.map((l) => { try { return JSON.parse(l); } catch { return null; } }).filter((l) => l && "route" in l);
  const shape = (l) => ({ ...l, durationMs: typeof l.durationMs, error: l.error === undefined ? undefined : errorText(l.error) });
  assert.deepEqual(lines(js).map(shape), lines(rust).map(shape));
});

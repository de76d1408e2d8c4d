// The second AI backend: an OpenAI-compatible server at AI_BASE_URL, used when
// the Workers AI binding is the local one that only throws (as under
// `wrangler dev --local`) or is missing.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import { startFakeOpenAi } from "./support/fake-openai.mjs";
import { freePort, startWorker } from "./support/stack.mjs";

describe("OpenAI-compatible backend", () => {
  let ai, worker;
  before(async () => {
    ai = await startFakeOpenAi({ apiKey: "sk-test" });
    worker = await startWorker({ ai: "local", vars: { AI_BASE_URL: `${ai.url}/v1/`, AI_API_KEY: "sk-test", AI_MODEL: "llama3.2" } });
  });
  after(async () => {
    await worker.stop();
    await ai.close();
  });

  test("chat goes to /v1/chat/completions with the same context and the key", async () => {
    await worker.api("POST", "/api/rooms/oa1/message", { text: "first" });
    const res = await worker.api("POST", "/api/rooms/oa1/message", { text: "context", userId: "bo" });
    assert.equal(res.status, 200);
    assert.deepEqual(JSON.parse(res.json.reply).slice(1), [["user", "first"], ["assistant", "echo: first"], ["user", "context"]]);
    const last = ai.requests.at(-1);
    assert.equal(last.body.model, "llama3.2");
    assert.equal(last.body.stream, true);
    assert.equal(last.body.tools, undefined, "llama3.2 is asked through tags");
    assert.equal(last.headers.authorization, "Bearer sk-test");
    assert.equal(last.body.messages[0].role, "system");
  });

  test("a failing server is a 502, then chat works", async () => {
    const res = await worker.api("POST", "/api/rooms/oa2/message", { text: "fail" });
    assert.equal(res.status, 502);
    assert.match(res.json.error, /answered 500/);
    assert.equal((await worker.api("POST", "/api/rooms/oa2/message", { text: "ok" })).status, 200);
  });
});

describe("misconfigured backends", () => {
  test("an unreachable AI_BASE_URL is a 502 naming it", async () => {
    const url = `http://127.0.0.1:${await freePort()}`;
    const worker = await startWorker({ ai: "local", vars: { AI_BASE_URL: url } });
    try {
      const res = await worker.api("POST", "/api/rooms/oa3/message", { text: "hi" });
      assert.equal(res.status, 502);
      assert.ok(res.json.error.includes(url), res.json.error);
    } finally {
      await worker.stop();
    }
  });

  test("the local-only binding without AI_BASE_URL is a 503 saying what to do", async () => {
    const worker = await startWorker({ ai: "local" });
    try {
      const res = await worker.api("POST", "/api/rooms/oa4/message", { text: "hi" });
      assert.equal(res.status, 503);
      assert.match(res.json.error, /wrangler dev --remote/);
      assert.match(res.json.error, /AI_BASE_URL/);
    } finally {
      await worker.stop();
    }
  });
});

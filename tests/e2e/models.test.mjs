// Chat on today's Workers AI catalog (the stand-in models it as documented):
// the default model, each answer shape, thinking kept out of the room and out
// of the time budget, and retired or unknown models; then the same
// treatment on the OpenAI-compatible backend.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import { THINK_MS } from "./support/ai-standin.mjs";
import { startFakeOpenAi } from "./support/fake-openai.mjs";
import { startWorker } from "./support/stack.mjs";

// Shorter than the stand-in's thinking: a model left to think times out.
const AI_TIMEOUT_MS = String(THINK_MS - 1000);
const THOUGHTS = /think|Okay, the user|reasoning/i;

/** A worker whose model is `model` (the default when undefined). */
async function withModel(model, run) {
  const vars = { AI_TIMEOUT_MS };
  if (model) vars.AI_MODEL = model;
  const worker = await startWorker({ vars });
  try {
    await run(worker);
  } finally {
    await worker.stop();
  }
}

async function chat(worker, room, text) {
  return worker.api("POST", `/api/rooms/${room}/message`, { text });
}

/** The inputs the model was last sent, as the service saw them. */
function lastInput(worker) {
  return worker.ai.requests.at(-1).inputs;
}

describe("today's Workers AI catalog", () => {
  test("the default model answers with its text only, thinking off, in time", async () => {
    await withModel(undefined, async (worker) => {
      const started = Date.now();
      const res = await chat(worker, "default", "hello");
      assert.equal(res.status, 200, res.text);
      assert.ok(Date.now() - started < THINK_MS, "no time spent thinking");
      assert.equal(res.json.reply, "echo: hello");
      assert.doesNotMatch(JSON.stringify(res.json.messages), THOUGHTS);
      const input = lastInput(worker);
      assert.equal(worker.ai.requests.at(-1).model, "@cf/zai-org/glm-4.7-flash");
      assert.deepEqual(input.chat_template_kwargs, { enable_thinking: false });
      assert.ok(Number.isInteger(input.max_completion_tokens), "the current token bound");
      assert.equal(input.max_tokens, undefined, "not the deprecated one");
    });
  });

  test("a {response} model answers in its shape", async () => {
    await withModel("@cf/meta/llama-3.3-70b-instruct-fp8-fast", async (worker) => {
      const res = await chat(worker, "classic", "hi");
      assert.equal(res.status, 200, res.text);
      assert.equal(res.json.reply, "echo: hi");
      const input = lastInput(worker);
      assert.ok(Number.isInteger(input.max_tokens));
      assert.equal(input.chat_template_kwargs, undefined);
    });
  });

  for (const model of ["@cf/google/gemma-4-26b-a4b-it", "@cf/moonshotai/kimi-k2.6", "@cf/openai/gpt-oss-20b"]) {
    test(`${model} answers a chat.completion, reasoning suppressed and kept out`, async () => {
      await withModel(model, async (worker) => {
        const res = await chat(worker, "completion", "hi there");
        assert.equal(res.status, 200, res.text);
        assert.equal(res.json.reply, "echo: hi there");
        assert.doesNotMatch(JSON.stringify(res.json.messages), THOUGHTS);
      });
    });
  }

  test("reasoning written into the answer as <think> is cut out", async () => {
    await withModel("@cf/deepseek-ai/deepseek-r1-distill-qwen-32b", async (worker) => {
      const res = await chat(worker, "inline", "hi");
      assert.equal(res.status, 200, res.text);
      assert.equal(res.json.reply, "echo: hi");
      assert.equal(res.json.messages[1].text, "echo: hi");
    });
  });

  test("an answer with no text is a 502 naming the model, and nothing is stored", async () => {
    await withModel(undefined, async (worker) => {
      const res = await chat(worker, "empty", "raw <think>only thoughts</think>");
      assert.equal(res.status, 502);
      assert.match(res.json.error, /the model @cf\/zai-org\/glm-4\.7-flash returned no text/);
      assert.deepEqual((await worker.api("GET", "/api/rooms/empty/messages")).json.messages, []);
    });
  });

  test("a retired model is a clear 502 that names AI_MODEL and the catalog; the room stores nothing", async () => {
    await withModel("@cf/meta/llama-3-8b-instruct", async (worker) => {
      const res = await chat(worker, "retired", "hi");
      assert.equal(res.status, 502);
      assert.match(res.json.error, /@cf\/meta\/llama-3-8b-instruct \(AI_MODEL\) is retired/);
      assert.match(res.json.error, /5028/);
      assert.match(res.json.error, /developers\.cloudflare\.com\/workers-ai\/models/);
      assert.deepEqual((await worker.api("GET", "/api/rooms/retired/messages")).json.messages, []);
      assert.equal((await chat(worker, "retired", "again")).status, 502, "still a clear error, not a crash");
    });
  });

  test("an unknown model is a clear 502 too", async () => {
    await withModel("@cf/nobody/no-such-model", async (worker) => {
      const res = await chat(worker, "unknown", "hi");
      assert.equal(res.status, 502);
      assert.match(res.json.error, /@cf\/nobody\/no-such-model \(AI_MODEL\) is unknown to Workers AI/);
      assert.match(res.json.error, /workers-ai\/models/);
    });
  });
});

describe("the OpenAI-compatible backend, same treatment", () => {
  let ai, worker;
  before(async () => {
    ai = await startFakeOpenAi({ models: ["qwen3:8b"] });
    worker = await startWorker({ ai: "local", vars: { AI_BASE_URL: ai.url, AI_MODEL: "qwen3:8b" } });
  });
  after(async () => {
    await worker.stop();
    await ai.close();
  });

  test("thinking is switched off where the model allows, and <think> cut out where it does not", async () => {
    const res = await chat(worker, "oa-think", "hi");
    assert.equal(res.status, 200, res.text);
    assert.equal(res.json.reply, "echo: hi");
    assert.doesNotMatch(JSON.stringify(res.json.messages), THOUGHTS);
    const sent = ai.requests.at(-1).body;
    assert.deepEqual(sent.chat_template_kwargs, { enable_thinking: false });
    assert.ok(Number.isInteger(sent.max_completion_tokens));
  });

  test("a model the server does not have is a clear 502 naming AI_MODEL", async () => {
    const other = await startWorker({ ai: "local", vars: { AI_BASE_URL: ai.url, AI_MODEL: "nope:1b" } });
    try {
      const res = await chat(other, "oa-missing", "hi");
      assert.equal(res.status, 502);
      assert.match(res.json.error, /no model nope:1b \(AI_MODEL\)/);
    } finally {
      await other.stop();
    }
  });
});

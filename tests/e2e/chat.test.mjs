// Chat through the Workers AI binding (a strict scripted stand-in): history,
// the 20-message window, concurrency, failures and persistence.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, describe, test } from "node:test";

import { assertMessages, startWorker } from "./support/stack.mjs";

describe("chat with the Workers AI binding", () => {
  let worker;
  before(async () => {
    worker = await startWorker({ vars: { AI_TIMEOUT_MS: "1500" } });
  });
  after(() => worker.stop());
  const room = () => `/api/rooms/${randomUUID()}`;

  test("a message gets a reply and both are stored, ts integer", async () => {
    const r = room();
    const before = Date.now();
    const res = await worker.api("POST", `${r}/message`, { text: "  hello there ", userId: "ana" });
    assert.equal(res.status, 200);
    assert.equal(res.json.reply, "echo: hello there");
    assertMessages(assert, res.json.messages);
    const [user, agent] = res.json.messages;
    assert.deepEqual({ role: user.role, userId: user.userId, text: user.text }, { role: "user", userId: "ana", text: "hello there" });
    assert.deepEqual(Object.keys(agent).sort(), ["role", "text", "ts"], "agent messages have no userId");
    assert.equal(agent.text, "echo: hello there");
    assert.ok(user.ts >= before - 1000 && agent.ts >= user.ts);
    assert.doesNotMatch(res.text, /"ts":\d+\.\d|"ts":\d+e/i, "ts is written as an integer");

    const history = await worker.api("GET", `${r}/messages`);
    assert.deepEqual(history.json.messages, res.json.messages);
  });

  test("the plural POST path is the same endpoint", async () => {
    const r = room();
    const res = await worker.api("POST", `${r}/messages`, { text: "plural" });
    assert.equal(res.status, 200);
    assert.equal(res.json.reply, "echo: plural");
    assert.equal(res.json.messages[0].userId, undefined);
  });

  test("the model sees the system prompt, the history as user/assistant, then the new message", async () => {
    const r = room();
    await worker.api("POST", `${r}/message`, { text: "first" });
    const res = await worker.api("POST", `${r}/message`, { text: "context" });
    const context = JSON.parse(res.json.reply);
    assert.deepEqual(context.map(([role]) => role), ["system", "user", "assistant", "user"]);
    assert.match(context[0][1], /call the run_command tool/, "the default model calls tools");
    assert.deepEqual(context.slice(1), [["user", "first"], ["assistant", "echo: first"], ["user", "context"]]);
  });

  test("a room keeps its last 20 messages", async () => {
    const r = room();
    for (let i = 0; i < 13; i++) {
      const res = await worker.api("POST", `${r}/message`, { text: `m${i}` });
      assert.equal(res.status, 200);
      assert.equal(res.json.messages.length, Math.min(20, 2 * (i + 1)));
    }
    const { json } = await worker.api("GET", `${r}/messages`);
    assert.equal(json.messages.length, 20);
    assert.equal(json.messages[0].text, "m3", "the oldest kept is the 4th exchange");
    assert.equal(json.messages[19].text, "echo: m12");
    const context = JSON.parse((await worker.api("POST", `${r}/message`, { text: "context" })).json.reply);
    assert.equal(context.length, 22, "system + 20 stored + new");
  });

  test("8 concurrent messages to one room lose nothing", async () => {
    const r = room();
    const texts = Array.from({ length: 8 }, (_, i) => `slow ${50 + ((i * 37) % 200)}`);
    const results = await Promise.all(texts.map((text, i) => worker.api("POST", `${r}/message`, { text, userId: `u${i}` })));
    for (const res of results) assert.equal(res.status, 200);
    const { json } = await worker.api("GET", `${r}/messages`);
    assert.equal(json.messages.length, 16);
    for (let i = 0; i < 8; i++) {
      const at = json.messages.findIndex((m) => m.userId === `u${i}`);
      assert.ok(at >= 0, `message of u${i} stored`);
      assert.equal(json.messages[at].text, texts[i]);
      assert.deepEqual(json.messages[at + 1], { ...json.messages[at + 1], role: "agent", text: `slept ${texts[i].slice(5)}` }, "reply right after");
    }
  });

  test("a model out of capacity (3040) is a 503 that says so, then the room works", async () => {
    const r = room();
    await worker.api("POST", `${r}/message`, { text: "before" });
    const res = await worker.api("POST", `${r}/message`, { text: "fail" });
    assert.equal(res.status, 503);
    assert.match(res.json.error, /^AI backend is busy: Workers AI has no capacity for @cf\/zai-org\/glm-4\.7-flash right now \(.*3040: Capacity.*\); try again in a moment$/);
    const next = await worker.api("POST", `${r}/message`, { text: "after" });
    assert.equal(next.status, 200);
    assert.deepEqual(next.json.messages.map((m) => m.text), ["before", "echo: before", "after", "echo: after"]);
  });

  test("the binding's options reach the service: one session per room, and the gateway of AI_GATEWAY_ID", async () => {
    const [a, b] = [room(), room()];
    const since = worker.ai.requests.length;
    await worker.api("POST", `${a}/message`, { text: "steps echo one" });
    await worker.api("POST", `${b}/message`, { text: "hello" });
    const seen = worker.ai.requests.slice(since);
    assert.deepEqual(
      seen.map((r) => r.session),
      [a, a, b].map((path) => path.split("/").at(-1)),
      "every call of a room, follow-ups included, in its room's session",
    );
    assert.ok(seen.every((r) => r.options.gateway === undefined), "no gateway unless one is named");
    const gated = await startWorker({ vars: { AI_TIMEOUT_MS: "1500", AI_GATEWAY_ID: "duet-gw" } });
    try {
      assert.equal((await gated.api("POST", `${room()}/message`, { text: "hi" })).status, 200);
      assert.deepEqual(gated.ai.requests.at(-1).options.gateway, { id: "duet-gw" });
    } finally {
      await gated.stop();
    }
  });

  test("a stalling model is a bounded 504, then the room works", async () => {
    const r = room();
    const started = Date.now();
    const res = await worker.api("POST", `${r}/message`, { text: "stall" });
    assert.equal(res.status, 504);
    assert.match(res.json.error, /did not answer within 1500 ms/);
    assert.ok(Date.now() - started < 10_000);
    const next = await worker.api("POST", `${r}/message`, { text: "again" });
    assert.equal(next.status, 200);
    assert.equal(next.json.messages.length, 2);
  });

  test("DELETE forgets the history", async () => {
    const r = room();
    await worker.api("POST", `${r}/message`, { text: "remember me" });
    const res = await worker.api("DELETE", r);
    // No sandbox backend in this stack: the history part succeeds, the sandbox part is reported.
    assert.equal(res.status, 207);
    assert.equal(res.json.cleaned, true);
    assert.match(res.json.errors[0], /^sandbox: .*SANDBOX_URL/);
    assert.deepEqual((await worker.api("GET", `${r}/messages`)).json, { messages: [] });
  });
});

describe("model selection", () => {
  test("without the binding or AI_BASE_URL, /message is a 503 saying how to get one", async () => {
    const worker = await startWorker({ ai: "none" });
    try {
      const res = await worker.api("POST", `/api/rooms/m2/message`, { text: "hi" });
      assert.equal(res.status, 503);
      assert.match(res.json.error, /AI_BASE_URL/);
      assert.deepEqual((await worker.api("GET", `/api/rooms/m2/messages`)).json.messages, []);
    } finally {
      await worker.stop();
    }
  });
});

describe("persistence", () => {
  test("history survives a restart of the local server", async () => {
    const first = await startWorker();
    const r = `/api/rooms/${randomUUID()}`;
    let stored;
    try {
      await first.api("POST", `${r}/message`, { text: "one", userId: "ana" });
      stored = (await first.api("POST", `${r}/message`, { text: "two" })).json.messages;
    } finally {
      await first.stop();
    }
    const second = await startWorker({ persistDir: first.persistDir });
    try {
      const { json } = await second.api("GET", `${r}/messages`);
      assert.equal(json.messages.length, 4);
      assert.deepEqual(json.messages, stored);
    } finally {
      await second.stop();
    }
  });
});

// The AI stand-ins themselves, over HTTP: the Workers AI stand-in asked as
// workerd's binding asks it through Miniflare's remote proxy, and the
// OpenAI-compatible server asked as a client would. They must model the
// services strictly (streamed framing, tool calls, refusals), or a worker
// that calls them wrongly would pass its tests. The last test checks that a
// streamed answer reaches a worker's `env.AI.run` through the real binding
// and proxy piece by piece, not gathered.
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { after, before, describe, test } from "node:test";

import { convertV4MiniflareOptions, Miniflare } from "miniflare";

import { pieces, startAiStandin, THINK_MS } from "./support/ai-standin.mjs";
import { startFakeOpenAi } from "./support/fake-openai.mjs";
import { ROOT } from "./support/stack.mjs";
import { sleep } from "./support/wait.mjs";

const TOKEN_MS = 20;
const GLM = "@cf/zai-org/glm-4.7-flash";
const KIMI = "@cf/moonshotai/kimi-k2.6";
const LLAMA_FAST = "@cf/meta/llama-3.1-8b-instruct-fast";
const LLAMA_TOOLS = "@cf/meta/llama-3.3-70b-instruct-fp8-fast";
const GPT_OSS = "@cf/openai/gpt-oss-20b";
const NO_THINKING = { chat_template_kwargs: { enable_thinking: false } };

const RUN_COMMAND = {
  type: "function",
  function: {
    name: "run_command",
    description: "Runs a shell command in the room's sandbox.",
    parameters: { type: "object", properties: { command: { type: "string", description: "The command line." } }, required: ["command"] },
  },
};

/** A tool result as the worker sends it. */
const resultOf = (cmd, out) => `$ ${cmd}\nexit code 0\nstdout:\n${out}\nstderr: (empty)`;

/** The body read as it arrives: every read with its time, then the whole text; `error` if the body broke. */
async function timedBody(res) {
  const reads = [];
  const decoder = new TextDecoder();
  const reader = res.body.getReader();
  let error;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      reads.push({ at: Date.now(), text: decoder.decode(value, { stream: true }) });
    }
  } catch (e) {
    error = e;
  }
  return { reads, text: reads.map((r) => r.text).join(""), error };
}

/** The `data:` payloads of an SSE text, each checked to be one `data: …` event. */
function eventsOf(text) {
  assert.ok(text === "" || text.endsWith("\n\n"), "every event ends with a blank line");
  return text.split("\n\n").filter(Boolean).map((event) => {
    assert.match(event, /^data: [^\n]+$/, "one data line per event");
    const data = event.slice("data: ".length);
    return data === "[DONE]" ? data : JSON.parse(data);
  });
}

/** Asserts that the reads came in several chunks spread over time. */
function assertSpread(reads, minSpanMs) {
  assert.ok(reads.length >= 3, `several chunks, got ${reads.length}`);
  const span = reads.at(-1).at - reads[0].at;
  assert.ok(span >= minSpanMs, `the chunks came over ${span} ms, expected at least ${minSpanMs}`);
}

/** What the chunks of a chat stream carry, gathered. */
function gather(events) {
  const chunks = events.filter((e) => e !== "[DONE]" && e.choices.length > 0);
  const deltas = chunks.map((c) => c.choices[0].delta);
  const calls = [];
  for (const part of deltas.flatMap((d) => d.tool_calls ?? [])) {
    calls[part.index] ??= { arguments: "" };
    if (part.id !== undefined) Object.assign(calls[part.index], { id: part.id, type: part.type, name: part.function.name });
    calls[part.index].arguments += part.function.arguments;
  }
  return {
    chunks,
    deltas,
    content: deltas.map((d) => d.content ?? "").join(""),
    calls,
    finish: chunks.map((c) => c.choices[0].finish_reason).filter((f) => f !== null),
  };
}

describe("the Workers AI stand-in", () => {
  let ai;
  before(async () => {
    ai = await startAiStandin({ tokenMs: TOKEN_MS });
  });
  after(() => ai.close());

  /** A call as the binding makes it through the remote proxy. */
  const run = (model, inputs, options = {}) =>
    fetch(ai.url, {
      method: "POST",
      headers: {
        "MF-URL": "http://workers-binding.ai/run?version=3",
        "MF-Header-cf-consn-model-id": model,
        "MF-Header-content-type": "application/json",
        "content-type": "application/json",
      },
      body: JSON.stringify({ inputs, options }),
    });
  const ask = (text, more = {}) => ({ messages: [{ role: "user", content: text }], ...more });
  /** A refusal as the binding reads it: the status and "<internalCode>: <description>". */
  const refusal = async (model, inputs) => {
    const res = await run(model, inputs);
    const body = await res.json();
    return { status: res.status, thrown: `${body.internalCode}: ${body.description}`, message: body.message };
  };

  test("pieces: about four characters a token, nothing lost", () => {
    assert.deepEqual(pieces("abcdefghij"), ["abcd", "efgh", "ij"]);
    assert.deepEqual(pieces(""), []);
    assert.equal(pieces("é🙂 façade").join(""), "é🙂 façade");
  });

  test("a {response} model streams its tokens over time, then the usage and [DONE]", async () => {
    const res = await run(LLAMA_FAST, ask("long 12", { stream: true }));
    assert.equal(res.status, 200);
    assert.equal(res.headers.get("content-type"), "text/event-stream");
    assert.equal(res.headers.get("mf-forwarded-response"), "1", "the proxy passes it on as the service's own");
    const { reads, text } = await timedBody(res);
    const events = eventsOf(text);
    const expected = Array.from({ length: 12 }, (_, i) => `word${i + 1}`).join(" ");
    assert.equal(events.length, pieces(expected).length + 2);
    assert.deepEqual(events.slice(0, -2).map((e) => e.response), pieces(expected));
    assert.deepEqual(events.at(-2), { response: "", usage: { prompt_tokens: 10, completion_tokens: 8, total_tokens: 18 } });
    assert.equal(events.at(-1), "[DONE]");
    assertSpread(reads, (pieces(expected).length - 2) * TOKEN_MS);
    assert.ok(ai.requests.at(-1).inputs.stream, "the request records that it streamed");
  });

  test("without stream the answers keep their JSON shapes", async () => {
    const res = await run(LLAMA_FAST, ask("hello"));
    assert.equal(res.headers.get("content-type"), "application/json");
    assert.deepEqual(await res.json(), { response: "echo: hello", usage: { prompt_tokens: 10, completion_tokens: 8, total_tokens: 18 } });
    const chat = await (await run(GLM, ask("hello", NO_THINKING))).json();
    assert.equal(chat.object, "chat.completion");
    assert.deepEqual(chat.choices[0].message, { role: "assistant", content: "echo: hello", refusal: null });
    assert.equal(chat.choices[0].finish_reason, "stop");
  });

  test("a chat model streams chat.completion.chunk objects: role first, content, finish, usage, [DONE]", async () => {
    const res = await run(GLM, ask("hello there", { ...NO_THINKING, stream: true }));
    assert.equal(res.headers.get("content-type"), "text/event-stream");
    const { reads, text } = await timedBody(res);
    const events = eventsOf(text);
    const { chunks, deltas, content, finish } = gather(events);
    for (const c of chunks) {
      assert.deepEqual(Object.keys(c).sort(), ["choices", "created", "id", "model", "object"]);
      assert.equal(c.object, "chat.completion.chunk");
      assert.equal(c.model, GLM);
      assert.equal(c.id, chunks[0].id);
    }
    assert.equal(deltas[0].role, "assistant");
    assert.equal(content, "echo: hello there");
    assert.deepEqual(finish, ["stop"]);
    assert.deepEqual(chunks.at(-1).choices[0].delta, {}, "the finish chunk has an empty delta");
    assert.deepEqual(events.at(-2).choices, [], "then a usage chunk");
    assert.equal(events.at(-2).usage.completion_tokens, 8);
    assert.equal(events.at(-1), "[DONE]");
    assert.ok(deltas.every((d) => d.reasoning_content === undefined && d.reasoning === undefined), "no thoughts when thinking is off");
    assertSpread(reads, 2 * TOKEN_MS);
  });

  test("thoughts stream only in the reasoning field, all before the content", async () => {
    const [glm, kimi] = await Promise.all(
      [[GLM, "reasoning_content"], [KIMI, "reasoning"]].map(async ([model, field]) => {
        const started = Date.now();
        const { deltas, content } = gather(eventsOf((await timedBody(await run(model, ask("hello", { stream: true })))).text));
        return { model, field, deltas, content, took: Date.now() - started };
      }),
    );
    for (const { model, field, deltas, content, took } of [glm, kimi]) {
      const thinking = deltas.map((d, i) => [d, i]).filter(([d]) => d[field] !== undefined);
      const firstContent = deltas.findIndex((d) => d.content);
      assert.ok(thinking.length > 1, `${model} streams its thoughts in ${field}`);
      assert.ok(thinking.every(([, i]) => i < firstContent), `${model}: every thought before the content`);
      assert.ok(thinking.every(([d]) => d.content === undefined), `${model}: no thought in content`);
      assert.equal(content, "echo: hello");
      const other = field === "reasoning" ? "reasoning_content" : "reasoning";
      assert.ok(deltas.every((d) => d[other] === undefined), `${model} uses only ${field}`);
      assert.ok(took >= THINK_MS - 100, `${model} thinks as long as unstreamed (${took} ms)`);
    }
  });

  test("a small budget is spent on thoughts: no content, finish_reason length", async () => {
    const { deltas, finish } = gather(eventsOf((await timedBody(await run(GPT_OSS, ask("hello", { stream: true, reasoning_effort: "low", max_tokens: 100 })))).text));
    assert.ok(deltas.some((d) => d.reasoning_content));
    assert.ok(deltas.every((d) => !d.content));
    assert.deepEqual(finish, ["length"]);
  });

  test("tool calls stream as an opening fragment, then argument fragments that join into JSON", async () => {
    const res = await run(GLM, ask("tools ls -la ;; cat 'a b.txt'", { ...NO_THINKING, stream: true, tools: [RUN_COMMAND] }));
    const events = eventsOf((await timedBody(res)).text);
    const { deltas, content, calls, finish } = gather(events);
    assert.equal(content, "");
    assert.deepEqual(finish, ["tool_calls"]);
    assert.equal(calls.length, 2, "two calls in one answer");
    assert.deepEqual(calls.map((c) => JSON.parse(c.arguments)), [{ command: "ls -la" }, { command: "cat 'a b.txt'" }]);
    assert.ok(calls.every((c) => c.type === "function" && c.name === "run_command" && typeof c.id === "string"));
    assert.notEqual(calls[0].id, calls[1].id);
    const opening = deltas.flatMap((d) => d.tool_calls ?? []).filter((t) => t.id !== undefined);
    assert.ok(opening.every((t) => t.function.arguments === ""), "the opening fragment has empty arguments");
    assert.ok(deltas.filter((d) => d.tool_calls).length > 4, "the arguments come in several fragments");
  });

  test("a tool call, unstreamed, then its result: saw the result's stdout", async () => {
    const first = await (await run(GLM, ask("tool ls", { ...NO_THINKING, tools: [RUN_COMMAND] }))).json();
    const { message, finish_reason } = first.choices[0];
    assert.equal(finish_reason, "tool_calls");
    assert.equal(message.content, "Let me check.");
    assert.equal(message.tool_calls.length, 1);
    const [call] = message.tool_calls;
    assert.deepEqual({ ...call, id: typeof call.id }, { id: "string", type: "function", function: { name: "run_command", arguments: '{"command":"ls"}' } });
    const messages = [
      { role: "user", content: "tool ls" },
      { role: "assistant", content: null, tool_calls: [call] },
      { role: "tool", tool_call_id: call.id, content: resultOf("ls", "a.txt\nb.txt") },
    ];
    const res = await run(GLM, { messages, ...NO_THINKING, tools: [RUN_COMMAND], stream: true });
    assert.equal(gather(eventsOf((await timedBody(res)).text)).content, "saw: a.txt\nb.txt");
  });

  test("the scripts: tool-timeout, badtool, tagged; without tools they fall back to <run> tags", async () => {
    const answer = async (messages, more = {}) => (await (await run(GLM, { messages, ...NO_THINKING, ...more })).json()).choices[0].message;
    const tools = { tools: [RUN_COMMAND] };
    const timed = await answer([{ role: "user", content: "tool-timeout 1500 sleep 5" }], tools);
    assert.deepEqual(JSON.parse(timed.tool_calls[0].function.arguments), { command: "sleep 5", timeoutMs: 1500 });
    const bad = await answer([{ role: "user", content: "badtool" }], tools);
    assert.deepEqual(bad.tool_calls.map((c) => c.function.name), ["run_command", "delete_everything"]);
    assert.throws(() => JSON.parse(bad.tool_calls[0].function.arguments));
    const results = ["error: the arguments are not JSON", "error: no such tool"];
    const recovered = await answer([
      { role: "user", content: "badtool" },
      { role: "assistant", content: null, tool_calls: bad.tool_calls },
      ...bad.tool_calls.map((c, i) => ({ role: "tool", tool_call_id: c.id, content: results[i] })),
    ], tools);
    assert.equal(recovered.content, `recovered: ${JSON.stringify(results)}`);
    assert.equal((await answer([{ role: "user", content: "tagged ls" }], tools)).content, "Let me check. <run>ls</run>");
    const untooled = await answer([{ role: "user", content: "tool ls" }]);
    assert.deepEqual(untooled, { role: "assistant", content: "Let me check. <run>ls</run>", refusal: null });
    assert.equal((await answer([{ role: "user", content: "tools a ;; b" }])).content, "<run>a</run><run>b</run>");
    assert.equal((await answer([{ role: "user", content: "tools a ;; b" }], { ...tools, tool_choice: "none" })).content, "<run>a</run><run>b</run>");
  });

  test("a round is an assistant turn, tool calls or text", async () => {
    const answer = async (messages) => (await (await run(GLM, { messages, ...NO_THINKING, tools: [RUN_COMMAND] })).json()).choices[0].message.content;
    const call = { id: "c1", type: "function", function: { name: "run_command", arguments: '{"command":"echo 0"}' } };
    const turns = [
      { role: "user", content: "forever" },
      { role: "assistant", content: null, tool_calls: [call] },
      { role: "tool", tool_call_id: "c1", content: resultOf("echo 0", "0") },
      { role: "assistant", content: "Round 1. <run>echo 1</run>" },
      { role: "user", content: "[Results of your commands, from the room's sandbox]\n\n$ echo 1\nexit code 0\nstdout:\n1\nstderr: (empty)" },
    ];
    assert.equal(await answer(turns), "Round 2. <run>echo 2</run>");
  });

  test("Kimi's call ids repeat from answer to answer; Llama 3.3 answers tool calls at the top level", async () => {
    const kimi = async () => (await (await run(KIMI, ask("tool ls", { chat_template_kwargs: { thinking: false }, tools: [RUN_COMMAND] }))).json()).choices[0].message.tool_calls[0].id;
    assert.deepEqual([await kimi(), await kimi()], ["functions.run_command:0", "functions.run_command:0"]);
    assert.deepEqual(await (await run(LLAMA_TOOLS, ask("tool ls", { tools: [RUN_COMMAND] }))).json(), {
      response: "Let me check.",
      tool_calls: [{ name: "run_command", arguments: { command: "ls" } }],
      usage: { prompt_tokens: 10, completion_tokens: 8, total_tokens: 18 },
    });
    const streamed = eventsOf((await timedBody(await run(LLAMA_TOOLS, ask("tool ls", { tools: [RUN_COMMAND], stream: true })))).text);
    assert.equal(streamed.slice(0, -2).map((e) => e.response).join(""), "Let me check.");
    assert.deepEqual(streamed.at(-2).tool_calls, [{ name: "run_command", arguments: { command: "ls" } }]);
  });

  test("tools are refused as the service refuses them", async () => {
    const call = { id: "c1", type: "function", function: { name: "run_command", arguments: '{"command":"ls"}' } };
    const invalid = { status: 400, thrown: "8001: Invalid input" };
    const glm = (more, messages = [{ role: "user", content: "tool ls" }]) => refusal(GLM, { messages, ...NO_THINKING, ...more });
    const cases = {
      "tools not an array": [{ tools: RUN_COMMAND }],
      "an empty tools array": [{ tools: [] }],
      "description false": [{ tools: [{ type: "function", function: { ...RUN_COMMAND.function, description: false } }] }],
      "a name with a space": [{ tools: [{ type: "function", function: { ...RUN_COMMAND.function, name: "run command" } }] }],
      "a tool without type": [{ tools: [{ function: RUN_COMMAND.function }] }],
      "parameters that are not an object": [{ tools: [{ type: "function", function: { ...RUN_COMMAND.function, parameters: "none" } }] }],
      'tool_choice "any"': [{ tools: [RUN_COMMAND], tool_choice: "any" }],
      "tool_choice naming no tool": [{ tools: [RUN_COMMAND], tool_choice: { type: "function", function: { name: "rm" } } }],
      "tool_choice without tools": [{ tool_choice: "auto" }],
      "an unanswered tool call": [{ tools: [RUN_COMMAND] }, [{ role: "user", content: "tool ls" }, { role: "assistant", content: null, tool_calls: [call] }, { role: "user", content: "and?" }]],
      "a half-answered pair of calls": [{ tools: [RUN_COMMAND] }, [
        { role: "user", content: "tools a ;; b" },
        { role: "assistant", content: null, tool_calls: [call, { ...call, id: "c2" }] },
        { role: "tool", tool_call_id: "c2", content: "x" },
      ]],
      "a stray tool_call_id": [{ tools: [RUN_COMMAND] }, [{ role: "user", content: "tool ls" }, { role: "assistant", content: null, tool_calls: [call] }, { role: "tool", tool_call_id: "c9", content: "x" }]],
      "a tool turn after a user turn": [{ tools: [RUN_COMMAND] }, [{ role: "user", content: "tool ls" }, { role: "tool", tool_call_id: "c1", content: "x" }]],
      "a tool call answered twice": [{ tools: [RUN_COMMAND] }, [
        { role: "user", content: "tool ls" },
        { role: "assistant", content: null, tool_calls: [call] },
        { role: "tool", tool_call_id: "c1", content: "x" },
        { role: "tool", tool_call_id: "c1", content: "x" },
      ]],
      "a tool turn without tool_call_id": [{ tools: [RUN_COMMAND] }, [{ role: "user", content: "tool ls" }, { role: "assistant", content: null, tool_calls: [call] }, { role: "tool", content: "x" }]],
      "arguments that are an object": [{ tools: [RUN_COMMAND] }, [
        { role: "user", content: "tool ls" },
        { role: "assistant", content: null, tool_calls: [{ ...call, function: { name: "run_command", arguments: { command: "ls" } } }] },
        { role: "tool", tool_call_id: "c1", content: "x" },
      ]],
      "a call without an id": [{ tools: [RUN_COMMAND] }, [
        { role: "user", content: "tool ls" },
        { role: "assistant", content: null, tool_calls: [{ type: "function", function: call.function }] },
      ]],
    };
    for (const [name, [more, messages]] of Object.entries(cases)) {
      const got = await glm(more, messages);
      assert.deepEqual({ status: got.status, thrown: got.thrown }, invalid, name);
      assert.match(got.message, /^8001: Invalid input \(.+\)$/, `${name}: the reason is in the message`);
    }
    assert.match(ai.requests.at(-1).error, /^8001: Invalid input/, "the request records why it was refused");
    const answered = [{ role: "user", content: "tool ls" }, { role: "assistant", content: null, tool_calls: [call] }, { role: "tool", tool_call_id: "c1", content: resultOf("ls", "x") }];
    const ok = await run(GLM, { messages: answered, ...NO_THINKING, tools: [RUN_COMMAND], tool_choice: "auto", parallel_tool_calls: true });
    assert.equal(ok.status, 200, "a well-formed exchange is accepted");
    assert.equal((await ok.json()).choices[0].message.content, "saw: x");
  });

  test("models whose catalog entry lists no function calling refuse tools; the older schema is strict about tools", async () => {
    for (const model of [LLAMA_FAST, "@cf/deepseek-ai/deepseek-r1-distill-qwen-32b"]) {
      const { status, thrown } = await refusal(model, ask("tool ls", { tools: [RUN_COMMAND] }));
      assert.equal(status, 400);
      assert.match(thrown, /^5006: Error: .* does not support function calling/, model);
    }
    const undescribed = { type: "function", function: { ...RUN_COMMAND.function, parameters: { type: "object", properties: { command: { type: "string" } } } } };
    for (const model of [LLAMA_TOOLS, GPT_OSS]) {
      assert.match((await refusal(model, ask("tool ls", { tools: [undescribed] }))).thrown, /^5006: Error: .*properties\/command/, `${model}: every parameter described`);
      assert.match((await refusal(model, ask("tool ls", { tools: [{ type: "function", function: { name: "x", parameters: RUN_COMMAND.function.parameters } }] }))).thrown, /^5006: .*description/);
    }
    const flat = await run(LLAMA_TOOLS, ask("tool ls", { tools: [RUN_COMMAND.function] }));
    assert.equal(flat.status, 200, "the older schema also takes the flat {name, description, parameters}");
    const call = { id: "c1", type: "function", function: { name: "run_command", arguments: '{"command":"ls"}' } };
    const nullContent = [{ role: "user", content: "tool ls" }, { role: "assistant", content: null, tool_calls: [call] }, { role: "tool", tool_call_id: "c1", content: "x" }];
    assert.match((await refusal(GPT_OSS, { messages: nullContent, tools: [RUN_COMMAND] })).thrown, /^5006: .*messages\/1\/content/, "gpt-oss needs string content");
    const emptyContent = nullContent.map((m) => (m.content === null ? { ...m, content: "" } : m));
    assert.equal((await run(GPT_OSS, { messages: emptyContent, tools: [RUN_COMMAND], reasoning_effort: "low" })).status, 200);
  });

  test("cut ends the stream without finish or [DONE]; stall-mid sends its tokens and then nothing", async () => {
    const cut = await timedBody(await run(GLM, ask("cut half an answer", { ...NO_THINKING, stream: true })));
    assert.ok(cut.error, "the body breaks off");
    const { content, finish } = gather(eventsOf(cut.text));
    assert.equal(content, "half an answer");
    assert.deepEqual(finish, []);
    assert.ok(!cut.text.includes("[DONE]"));
    const cutResponse = await timedBody(await run(LLAMA_FAST, ask("cut partly", { stream: true })));
    assert.ok(cutResponse.error);
    assert.deepEqual(eventsOf(cutResponse.text).map((e) => e.response), pieces("partly"));
    assert.equal((await (await run(LLAMA_FAST, ask("cut whole"))).json()).response, "whole", "unstreamed, cut is a plain answer");

    const reader = (await run(GLM, ask("stall-mid and then", { ...NO_THINKING, stream: true }))).body.getReader();
    let text = "";
    const quiet = Symbol("quiet");
    for (;;) {
      // Read until the stream has been silent for ten tokens' time.
      const next = await Promise.race([reader.read(), sleep(10 * TOKEN_MS).then(() => quiet)]);
      if (next === quiet) break;
      assert.ok(!next.done, "the stream does not end");
      text += new TextDecoder().decode(next.value);
    }
    await reader.cancel();
    assert.equal(gather(eventsOf(text)).content, "and then");
    assert.ok(!text.includes("finish_reason\":\"stop") && !text.includes("[DONE]"));
  });
});

describe("the OpenAI-compatible server", () => {
  let ai;
  before(async () => {
    ai = await startFakeOpenAi({ tokenMs: TOKEN_MS });
  });
  after(() => ai.close());

  const post = (body) => fetch(`${ai.url}/v1/chat/completions`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });

  test("streams chunks as the Workers AI stand-in does; the usage chunk only when asked", async () => {
    const res = await post({ model: "m", messages: [{ role: "user", content: "tool ls -l" }], tools: [RUN_COMMAND], stream: true });
    assert.equal(res.headers.get("content-type"), "text/event-stream");
    const { reads, text } = await timedBody(res);
    const events = eventsOf(text);
    const { deltas, content, calls, finish } = gather(events);
    assert.equal(deltas[0].role, "assistant");
    assert.equal(content, "Let me check.");
    assert.deepEqual(calls.map((c) => [c.name, JSON.parse(c.arguments)]), [["run_command", { command: "ls -l" }]]);
    assert.deepEqual(finish, ["tool_calls"]);
    assert.ok(events.every((e) => e === "[DONE]" || e.choices.length > 0), "no usage chunk unless asked");
    assert.equal(events.at(-1), "[DONE]");
    assertSpread(reads, 3 * TOKEN_MS);
    const counted = eventsOf((await timedBody(await post({ model: "m", messages: [{ role: "user", content: "hi" }], stream: true, stream_options: { include_usage: true } }))).text);
    assert.deepEqual(counted.at(-2).choices, []);
    assert.equal(counted.at(-2).usage.total_tokens, 18);

    const answered = await post({
      model: "m",
      tools: [RUN_COMMAND],
      messages: [
        { role: "user", content: "tool ls -l" },
        { role: "assistant", content: "Let me check.", tool_calls: [{ id: calls[0].id, type: "function", function: { name: "run_command", arguments: calls[0].arguments } }] },
        { role: "tool", tool_call_id: calls[0].id, content: resultOf("ls -l", "total 0") },
      ],
    });
    assert.equal((await answered.json()).choices[0].message.content, "saw: total 0");
  });

  test("refuses bad tool use with a 400 {error: {message}}", async () => {
    const call = { id: "c1", type: "function", function: { name: "run_command", arguments: "{}" } };
    for (const body of [
      { tools: [RUN_COMMAND], tool_choice: "any", messages: [{ role: "user", content: "hi" }] },
      { tools: [{ type: "function", function: { name: "bad.name" } }], messages: [{ role: "user", content: "hi" }] },
      { tools: [RUN_COMMAND], messages: [{ role: "user", content: "hi" }, { role: "assistant", content: null, tool_calls: [call] }, { role: "user", content: "and?" }] },
      { tools: [RUN_COMMAND], messages: [{ role: "user", content: "hi" }, { role: "tool", tool_call_id: "c1", content: "x" }] },
    ]) {
      const res = await post({ model: "m", ...body });
      assert.equal(res.status, 400);
      const { error } = await res.json();
      assert.equal(typeof error.message, "string");
    }
  });

  test("cut breaks the stream off", async () => {
    const cut = await timedBody(await post({ model: "m", messages: [{ role: "user", content: "cut some words" }], stream: true }));
    assert.ok(cut.error);
    assert.equal(gather(eventsOf(cut.text)).content, "some words");
    assert.ok(!cut.text.includes("[DONE]"));
  });
});

describe("through workerd's binding and Miniflare's remote proxy", () => {
  let ai;
  let mf;
  let url;
  before(async () => {
    ai = await startAiStandin({ tokenMs: 40 });
    // A worker that hands back what env.AI.run returned: the stream itself, or the thrown message.
    const script = `export default {
      async fetch(request, env) {
        const { model, inputs } = await request.json();
        try {
          const out = await env.AI.run(model, inputs);
          if (out instanceof ReadableStream) return new Response(out, { headers: { "content-type": "text/event-stream" } });
          return Response.json(out);
        } catch (e) {
          return Response.json({ thrown: e.message }, { status: 502 });
        }
      },
    };`;
    const [, compatibilityDate] = /^compatibility_date = "(.+)"$/m.exec(fs.readFileSync(path.join(ROOT, "wrangler.toml"), "utf8"));
    const worker = { name: "probe", modules: true, script, compatibilityDate, ai: { binding: "AI", remoteProxyConnectionString: new URL(ai.url) } };
    mf = new Miniflare({ ...convertV4MiniflareOptions({ host: "127.0.0.1", port: 0, workers: [worker] }), logRequests: false });
    url = (await mf.ready).toString();
  });
  after(async () => {
    await mf?.dispose();
    await ai?.close();
  });

  const through = (model, inputs) => fetch(url, { method: "POST", body: JSON.stringify({ model, inputs }) });

  test("env.AI.run returns the stream, which arrives piece by piece", async () => {
    const res = await through(LLAMA_FAST, { messages: [{ role: "user", content: "long 10" }], stream: true });
    assert.equal(res.status, 200);
    const { reads, text } = await timedBody(res);
    const events = eventsOf(text);
    assert.equal(events.at(-1), "[DONE]");
    const expected = Array.from({ length: 10 }, (_, i) => `word${i + 1}`).join(" ");
    assert.equal(events.slice(0, -2).map((e) => e.response).join(""), expected);
    assertSpread(reads, (pieces(expected).length - 3) * 40);
    assert.ok(reads.length >= pieces(expected).length / 3, `not gathered on the way: ${reads.length} reads`);
  });

  test("a refusal of a streamed call is thrown, not streamed", async () => {
    const res = await through(GLM, { messages: [{ role: "user", content: "hi" }], stream: true, tools: [RUN_COMMAND], tool_choice: "any" });
    assert.equal(res.status, 502);
    assert.deepEqual(await res.json(), { thrown: "8001: Invalid input" });
  });
});

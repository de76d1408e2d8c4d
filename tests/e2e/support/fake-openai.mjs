// A local OpenAI-compatible chat completions server (the second AI backend),
// answering with the same script as the Workers AI stand-in. It checks what
// a real server would: the path, JSON, a model name it serves (404
// otherwise, as Ollama and OpenAI answer), well-formed messages, the tool
// use OpenAI's API accepts (the stand-in's `checkToolUse`, of
// ./ai/input.mjs: function tools with names of [a-zA-Z0-9_-]{1,64}, a
// `tool_choice` among them, every tool call answered by `tool` turns right
// after it), and the bearer key when one is configured; bad requests are
// 400 `{error: {message}}`. Like Ollama, it writes a reasoning model's
// (qwen3, deepseek-r1) thoughts into the content as <think>…</think>,
// whatever the request says; its error bodies echo the user's message, as
// some servers' do. With `stream: true` it answers
// `chat.completion.chunk` events as OpenAI does, the usage chunk only when
// `stream_options.include_usage` asks for it.
import http from "node:http";

import { chatCompletion, usage } from "./ai/answers.mjs";
import { checkToolUse } from "./ai/input.mjs";
import { reply } from "./ai/scripts.mjs";
import { chatEvents, sendEvents } from "./ai/sse.mjs";

const ROLES = ["system", "developer", "user", "assistant", "tool"];

/** A request OpenAI's API would refuse with a 400. */
class BadRequest extends Error {}

function checkBody(body) {
  const ok =
    typeof body.model === "string" && body.model.length > 0 && Array.isArray(body.messages) && body.messages.length > 0 &&
    body.messages.every((m) => ROLES.includes(m?.role) && (typeof m.content === "string" || (m.role === "assistant" && m.content == null && m.tool_calls !== undefined)));
  if (!ok) throw new BadRequest("model and messages are required");
  if (body.stream !== undefined && body.stream !== null && typeof body.stream !== "boolean") throw new BadRequest("Invalid type for 'stream': expected a boolean");
  checkToolUse(body, { legacy: false, fail: (why) => { throw new BadRequest(why); } });
}

/** The server on loopback; `tokenMs` is the time between streamed tokens. */
export async function startFakeOpenAi({ apiKey, models, tokenMs = 2 } = {}) {
  const requests = [];
  const server = http.createServer(async (req, res) => {
    const send = (status, body) => {
      res.writeHead(status, { "content-type": "application/json" });
      res.end(JSON.stringify(body));
    };
    let raw = "";
    for await (const chunk of req) raw += chunk;
    if (req.method !== "POST" || req.url !== "/v1/chat/completions") return send(404, { error: { message: "not found" } });
    if (apiKey && req.headers.authorization !== `Bearer ${apiKey}`) return send(401, { error: { message: "bad key" } });
    let body;
    try {
      body = JSON.parse(raw);
      checkBody(body);
    } catch (e) {
      if (e instanceof SyntaxError) return send(400, { error: { message: "invalid JSON" } });
      if (e instanceof BadRequest) return send(400, { error: { message: e.message } });
      throw e;
    }
    if (models && !models.includes(body.model)) return send(404, { error: { message: `model "${body.model}" not found, try pulling it first` } });
    requests.push({ headers: req.headers, body });
    let answer;
    try {
      answer = await reply(body.messages, { tools: body.tools !== undefined && body.tool_choice !== "none" });
    } catch (e) {
      return send(500, { error: { message: `${e.message} while answering: ${body.messages.at(-1).content}` } });
    }
    const thinks = /qwen3|deepseek-r1/.test(body.model) && answer.text !== null;
    const calls = answer.calls.map((call, i) => ({ id: `call_${requests.length}_${i}`, ...call }));
    const chat = {
      id: `chatcmpl-${requests.length}`,
      model: body.model,
      created: Math.floor(Date.now() / 1000),
      text: thinks ? `<think>\nThe user said something; answer it.\n</think>\n\n${answer.text}` : answer.text,
      calls,
      thoughts: null,
      finish: calls.length > 0 ? "tool_calls" : "stop",
      usage: usage(8),
      end: answer.end,
    };
    if (!body.stream) return send(200, chatCompletion(chat));
    await sendEvents(res, {}, chatEvents(chat, { tokenMs, usageChunk: body.stream_options?.include_usage === true }), answer.end);
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${server.address().port}`,
    requests,
    close: () => new Promise((resolve) => { server.closeAllConnections(); server.close(resolve); }),
  };
}

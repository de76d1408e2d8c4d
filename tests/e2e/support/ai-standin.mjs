// A scripted stand-in for the Workers AI service, modelling today's catalog
// as Cloudflare documents it (model schemas, the 2026-05-08 deprecations,
// the platform's error codes), not as the worker happens to call it. Its
// parts are in ./ai/: the catalog (catalog.mjs), the strict checks of what
// a request may carry (input.mjs), the scripted answers (scripts.mjs), an
// answer written whole (answers.mjs) or streamed as server-sent events
// (sse.mjs), and the service's errors (errors.mjs). This file puts them
// together into the service the binding calls.
//
// The worker's `AI` binding is workerd's own (the `Ai` class of
// `cloudflare-internal:ai-api`), given to it the way `wrangler dev` gives a
// remote binding: its requests reach this server through Miniflare's
// remote-proxy client, with the original URL and headers in `MF-URL` and
// `MF-Header-*`, and an answer marked `MF-Forwarded-Response` is handed back
// as it is, its body streamed through. So the binding's real code builds the
// request (`POST /run?version=3` with `{inputs, options}`, the model in
// `cf-consn-model-id`) and turns answers into what `env.AI.run` returns: an
// error status is thrown (`{internalCode, name, description}` becomes
// "<code>: <description>"), an `application/json` body is parsed, and any
// other body (`text/event-stream` when `inputs.stream` is true) is returned
// as its ReadableStream. Only the service is stood in for.
//
// The binding's third argument, as documented (Workers AI, "Prompt caching";
// AI Gateway, "Workers Bindings") and as workerd's binding sends it:
// `extraHeaders` become headers of the request (`x-session-affinity` keeps a
// session's calls on one model instance, for its prefix cache), and
// `gateway: {id, ...}` goes in the body's `options`, the request then going
// to `/ai-gateway/run` instead of `/run`. A gateway request without an id is
// refused, as AI Gateway needs one.
//
// Source (2026-12): the binding, workerd src/cloudflare/internal/ai-api.ts
// (`Ai.run`, as built into workerd 1.20261117); Miniflare's remote-proxy
// client, src/workers/shared/remote-proxy-client.worker.ts (`makeFetch`,
// which hands a marked answer back as `new Response(response.body,
// response)`).
import http from "node:http";

import { chatCompletion, usage } from "./ai/answers.mjs";
import { INLINE_THOUGHTS, THINK_TOKENS, THOUGHTS, thinking } from "./ai/catalog.mjs";
import { AiError } from "./ai/errors.mjs";
import { check } from "./ai/input.mjs";
import { reply } from "./ai/scripts.mjs";
import { chatEvents, responseEvents, sendEvents } from "./ai/sse.mjs";
import { sleep } from "./wait.mjs";

export { THINK_MS } from "./ai/catalog.mjs";
export { pieces } from "./ai/sse.mjs";

function sendJson(res, status, headers, body) {
  res.writeHead(status, { "content-type": "application/json", ...headers });
  res.end(JSON.stringify(body));
}

// Marks an answer as the service's own, which the proxy client passes on as it is.
const FORWARDED = { "MF-Forwarded-Response": "1" };

/** Runs `model` on `input` as the service does, answering on `res`. */
async function respond(res, model, input, { tokenMs, serial }) {
  const entry = check(model, input);
  const thinkMs = thinking(entry, input);
  const budget = input.max_completion_tokens ?? input.max_tokens ?? (entry.shape === "chat" ? 4096 : 256);
  const spent = thinkMs > 0 && budget <= THINK_TOKENS;
  // A streamed answer thinks while it streams its thoughts.
  if (thinkMs > 0 && !input.stream) await sleep(thinkMs);
  const offered = input.tools !== undefined && input.tool_choice !== "none";
  const answer = spent ? { text: null, calls: [], end: "done" } : await reply(input.messages, { tools: offered });
  serial.n += 1;
  const calls = answer.calls.map((call, i) => ({ id: entry.kimiCallIds ? `functions.${call.name}:${i}` : `chatcmpl-tool-${serial.n}-${i}`, ...call }));
  const used = usage(spent ? budget : 8);
  if (entry.shape === "response") {
    const native = { response: entry.think === "inline" ? `${INLINE_THOUGHTS}${answer.text}` : (answer.text ?? ""), usage: used };
    if (calls.length > 0) native.tool_calls = calls.map((call) => ({ name: call.name, arguments: parsedOr(call.arguments) }));
    if (input.stream) return sendEvents(res, FORWARDED, responseEvents(native, { tokenMs, end: answer.end }), answer.end);
    return sendJson(res, 200, FORWARDED, native);
  }
  const chat = {
    id: `chatcmpl-${serial.n}`,
    model,
    created: Math.floor(Date.now() / 1000),
    text: answer.text,
    calls,
    thoughts: thinkMs > 0 ? THOUGHTS : null,
    reasoningField: entry.reasoningField ?? "reasoning_content",
    finish: spent ? "length" : calls.length > 0 ? "tool_calls" : "stop",
    usage: used,
    end: answer.end,
  };
  if (input.stream) return sendEvents(res, FORWARDED, chatEvents(chat, { tokenMs, thinkMs, usageChunk: true }), answer.end);
  return sendJson(res, 200, FORWARDED, chatCompletion(chat));
}

/** `text` parsed as JSON, or `text` itself when it is not JSON. */
function parsedOr(text) {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

/**
 * The service on loopback. `requests` records each call's model, inputs
 * (so `stream` and `tools` too), options, session and, when it was
 * refused, the error. Give `url` to the binding as its remote-proxy
 * connection string. `tokenMs` is the time between streamed tokens.
 */
export async function startAiStandin({ tokenMs = 2 } = {}) {
  const requests = [];
  const serial = { n: 0 };
  const server = http.createServer(async (req, res) => {
    let raw = "";
    for await (const chunk of req) raw += chunk;
    const target = new URL(req.headers["mf-url"] ?? "http://invalid/");
    const model = req.headers["mf-header-cf-consn-model-id"];
    const gatewayPath = target.pathname === "/ai-gateway/run";
    if (req.method !== "POST" || target.host !== "workers-binding.ai" || !(target.pathname === "/run" || gatewayPath)) {
      return sendJson(res, 404, FORWARDED, { internalCode: 3003, name: "AiError", message: "not found", description: `Request is missing headers or body: ${target}` });
    }
    let record;
    try {
      const { inputs, options } = JSON.parse(raw);
      if (gatewayPath && typeof options?.gateway?.id !== "string") throw new AiError(2001, "a gateway request needs options.gateway.id");
      // What the binding's third argument became: its `extraHeaders` as
      // request headers, the rest (`gateway`) in the body's `options`.
      record = { model, inputs, options, session: req.headers["mf-header-x-session-affinity"] };
      requests.push(record);
      await respond(res, model, inputs, { tokenMs, serial });
    } catch (e) {
      if (!(e instanceof AiError)) throw e;
      if (record) record.error = e.message;
      sendJson(res, e.status, FORWARDED, { internalCode: e.code, name: "AiError", message: e.message, description: e.description });
    }
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${server.address().port}/`,
    requests,
    close: () => new Promise((resolve) => { server.closeAllConnections(); server.close(resolve); }),
  };
}

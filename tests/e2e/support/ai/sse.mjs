// How the AI stand-ins stream an answer: as server-sent events, the way
// Workers AI streams one.
//
// Streaming (`stream: true`), as the schemas say (`stream`: "streamed back
// incrementally using SSE"; the output a `text/event-stream` besides the
// JSON object) and the streaming guide shows: one `data: <json>` event per
// token, then `data: [DONE]`. A `{response}` model sends `{"response":
// "<token>"}` events and a last `{"response": "", "usage": {...}}`; an
// OpenAI-style model (and gpt-oss) sends `chat.completion.chunk` objects:
// a first delta with the role, the thoughts in `delta.reasoning_content`
// (`reasoning` for Kimi) before the content in `delta.content`, tool calls
// as `delta.tool_calls` (first `{index, id, type, function: {name,
// arguments: ""}}`, then argument fragments `{index, function:
// {arguments}}`), a chunk with an empty delta and the `finish_reason`, and
// one with `choices: []` and the usage. A token here is a piece of about
// four characters (`pieces`), `tokenMs` apart (2 ms unless told: faster than
// any model, so that tests are quick; benchmarks set a pace); thoughts are spread over the
// thinking time.
//
// Sources (2026-12): the Workers AI "Streaming" guide (github.com/
// cloudflare/cloudflare-docs/pull/19018: `data: {"response": ...}` events
// ending in `data: [DONE]`); chunk shapes as captured in cloudflare/ai
// packages/workers-ai-provider/test/stream-text.test.ts.
import { sleep } from "../wait.mjs";

/** `text` as the tokens a model streams: pieces of up to four characters. */
export function pieces(text) {
  const chars = Array.from(text ?? "");
  return Array.from({ length: Math.ceil(chars.length / 4) }, (_, i) => chars.slice(4 * i, 4 * i + 4).join(""));
}

/** The chunks of `chat` streamed; thoughts spread over `thinkMs`, tokens `tokenMs` apart. */
export async function* chatEvents(chat, { tokenMs, thinkMs = 0, usageChunk }) {
  const head = { id: chat.id, object: "chat.completion.chunk", created: chat.created, model: chat.model };
  const chunk = (delta, finish = null) => ({ ...head, choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }] });
  yield chunk({ role: "assistant", content: "" });
  const thoughts = pieces(chat.thoughts);
  for (const part of thoughts) {
    await sleep(thinkMs / thoughts.length);
    yield chunk({ [chat.reasoningField]: part });
  }
  for (const part of pieces(chat.text)) {
    await sleep(tokenMs);
    yield chunk({ content: part });
  }
  for (const [index, call] of chat.calls.entries()) {
    await sleep(tokenMs);
    yield chunk({ tool_calls: [{ index, id: call.id, type: "function", function: { name: call.name, arguments: "" } }] });
    for (const part of pieces(call.arguments)) {
      await sleep(tokenMs);
      yield chunk({ tool_calls: [{ index, function: { arguments: part } }] });
    }
  }
  if (chat.end !== "done") return;
  yield chunk({}, chat.finish);
  if (usageChunk) yield { ...head, choices: [], usage: chat.usage };
  yield "[DONE]";
}

/** A `{response}` model's events: its tokens, then the usage (and any tool calls), then [DONE]. */
export async function* responseEvents(answer, { tokenMs, end }) {
  for (const part of pieces(answer.response)) {
    await sleep(tokenMs);
    yield { response: part };
  }
  if (end !== "done") return;
  yield { response: "", ...(answer.tool_calls && { tool_calls: answer.tool_calls }), usage: answer.usage };
  yield "[DONE]";
}

/**
 * Streams `events` (JSON values, or "[DONE]") as server-sent events. `end`:
 * "done" ends the response, "cut" drops the connection, "stall" leaves it
 * open until the client or the server closes it.
 */
export async function sendEvents(res, headers, events, end) {
  res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache", ...headers });
  res.flushHeaders();
  for await (const data of events) {
    if (res.destroyed) return;
    const line = `data: ${typeof data === "string" ? data : JSON.stringify(data)}\n\n`;
    await new Promise((resolve) => res.write(line, resolve));
  }
  if (end === "cut") res.destroy();
  else if (end === "done") res.end();
}

// A scripted stand-in for the Workers AI service, modelling today's catalog
// as Cloudflare documents it (model schemas, the 2026-05-08 deprecations,
// the platform's error codes), not as the worker happens to call it.
//
// The worker's `AI` binding is workerd's own (the `Ai` class of
// `cloudflare-internal:ai-api`), given to it the way `wrangler dev` gives a
// remote binding: its requests reach this server through Miniflare's
// remote-proxy client, with the original URL and headers in `MF-URL` and
// `MF-Header-*`. So the binding's real code builds the request
// (`POST /run?version=3` with `{inputs, options}`, the model in
// `cf-consn-model-id`) and turns error answers (`{internalCode, name,
// description}`) into the errors the worker sees; only the service is
// stood in for.
//
// The binding's third argument, as documented (Workers AI, "Prompt caching";
// AI Gateway, "Workers Bindings") and as workerd's binding sends it:
// `extraHeaders` become headers of the request (`x-session-affinity` keeps a
// session's calls on one model instance, for its prefix cache), and
// `gateway: {id, ...}` goes in the body's `options`, the request then going
// to `/ai-gateway/run` instead of `/run`. A gateway request without an id is
// refused, as AI Gateway needs one.
//
// - the eighteen models retired on 2026-05-30 throw the service's 5028;
//   a model that is not in the catalog throws 5007;
// - `{response}` models (the Llama -fast variants) take `max_tokens` and
//   answer `{response, usage}`; DeepSeek R1 Distill writes its reasoning
//   into that response, closed by `</think>`;
// - OpenAI-style models (GLM, Gemma 4, Nemotron 3, Qwen 3.8, Kimi) answer a
//   `chat.completion` object and think before answering (slowly, with the
//   thoughts in `reasoning_content`, or `reasoning` for Kimi) unless
//   `chat_template_kwargs` turns it off (`enable_thinking: false`; Kimi's
//   switch is `thinking`). Thinking spends the output budget: with a small
//   one, `content` is null. `max_tokens` is deprecated there but accepted;
//   properties the schemas do not name are ignored, as the schemas forbid
//   none;
// - gpt-oss always reasons; `reasoning_effort` sets how long.
//
// Input is validated as the schemas say: an object with a non-empty
// `messages` array of well-formed turns (a `Map`, which serde_wasm_bindgen
// makes of a JSON map, reaches the service as `{}`), and typed known
// properties. Failures answer as the service does: an HTTP error whose body
// names the error (`AiError`) and its internal code.
//
// What a model answers depends on the last user message (see `script`).
import http from "node:http";

const RETIRED = new Set([
  "@cf/moonshotai/kimi-k2.5", "@hf/meta-llama/meta-llama-3-8b-instruct", "@cf/meta/llama-3-8b-instruct",
  "@cf/meta/llama-3-8b-instruct-awq", "@cf/meta/llama-3.1-8b-instruct", "@cf/meta/llama-3.1-8b-instruct-awq",
  "@cf/meta/llama-3.1-70b-instruct", "@cf/meta/llama-2-7b-chat-int8", "@cf/meta/llama-2-7b-chat-fp16",
  "@cf/mistral/mistral-7b-instruct-v0.1", "@hf/mistral/mistral-7b-instruct-v0.2", "@hf/google/gemma-7b-it",
  "@cf/google/gemma-3-12b-it", "@hf/nousresearch/hermes-2-pro-mistral-7b", "@cf/microsoft/phi-2",
  "@cf/defog/sqlcoder-7b-2", "@cf/unum/uform-gen2-qwen-500m", "@cf/facebook/bart-large-cnn",
]);

// shape: "response" or "chat"; think: how the model reasons.
const CATALOG = new Map([
  ["@cf/meta/llama-3.3-70b-instruct-fp8-fast", { shape: "response", think: "never" }],
  ["@cf/meta/llama-3.1-8b-instruct-fast", { shape: "response", think: "never" }],
  ["@cf/deepseek-ai/deepseek-r1-distill-qwen-32b", { shape: "response", think: "inline" }],
  ["@cf/zai-org/glm-4.7-flash", { shape: "chat", think: "enable_thinking" }],
  ["@cf/zai-org/glm-5.3-flash", { shape: "chat", think: "enable_thinking" }],
  ["@cf/google/gemma-4-26b-a4b-it", { shape: "chat", think: "enable_thinking" }],
  ["@cf/nvidia/nemotron-3-120b-a12b", { shape: "chat", think: "enable_thinking" }],
  ["@cf/qwen/qwen3.8-27b", { shape: "chat", think: "enable_thinking" }],
  ["@cf/moonshotai/kimi-k2.6", { shape: "chat", think: "thinking", reasoningField: "reasoning" }],
  ["@cf/openai/gpt-oss-20b", { shape: "chat", think: "effort", legacyInput: true }],
  ["@cf/openai/gpt-oss-120b", { shape: "chat", think: "effort", legacyInput: true }],
]);

/** How long thinking takes: longer than the tests' model time limits. */
export const THINK_MS = 2500;
const EFFORT_MS = { low: 50, medium: THINK_MS, high: 2 * THINK_MS };
/** Output tokens that thinking alone uses up. */
const THINK_TOKENS = 256;
const CHAT_ROLES = new Set(["system", "developer", "user", "assistant", "tool"]);

/** A failure of the service, answered with `status`. */
class AiError extends Error {
  constructor(code, description, status = 400) {
    super(`${code}: ${description}`);
    Object.assign(this, { code, description, status });
  }
}

function invalid(why) {
  throw new AiError(5006, `Error: ${why}`);
}

const isPlainObject = (v) => v !== null && typeof v === "object" && Object.getPrototypeOf(v) === Object.prototype;
const isIntOrNull = (v) => v === undefined || v === null || Number.isInteger(v);
const inRange = (v, lo, hi) => v === undefined || v === null || (typeof v === "number" && v >= lo && v <= hi);

function checkMessages(messages, strictRoles) {
  if (!Array.isArray(messages) || messages.length === 0) {
    invalid("oneOf at '/' not met, 0 matches: required properties at '/' are 'prompt', required properties at '/' are 'messages'");
  }
  messages.forEach((m, i) => {
    if (!isPlainObject(m)) invalid(`'/messages/${i}' must be an object`);
    if (typeof m.role !== "string" || (strictRoles && !CHAT_ROLES.has(m.role))) invalid(`'/messages/${i}/role' is not valid`);
    const nullable = strictRoles && m.role === "assistant";
    const ok = typeof m.content === "string" || (strictRoles && Array.isArray(m.content)) || (nullable && m.content == null);
    if (!ok) invalid(`Type mismatch of '/messages/${i}/content', '${m.content === null ? "null" : typeof m.content}' not in 'string'`);
  });
}

/** Validates `input` for `model` as its schema does; returns the model's entry. */
function check(model, input) {
  if (RETIRED.has(model)) throw new AiError(5028, "This model was deprecated on 2026-05-30. Please use an alternative model.", 410);
  const entry = CATALOG.get(model);
  if (!entry) throw new AiError(5007, `No such model ${model} or task`);
  if (!isPlainObject(input)) invalid("oneOf at '/' not met, 0 matches: required properties at '/' are 'prompt', required properties at '/' are 'messages'");
  const openAiStyle = entry.shape === "chat" && !entry.legacyInput;
  checkMessages(input.messages, openAiStyle);
  if (!isIntOrNull(input.max_tokens)) invalid("Type mismatch of '/max_tokens'");
  if (openAiStyle) {
    if (!isIntOrNull(input.max_completion_tokens)) invalid("Type mismatch of '/max_completion_tokens'");
    if (!inRange(input.temperature, 0, 2)) invalid("'/temperature' must be from 0 to 2");
    const effort = input.reasoning_effort;
    if (effort !== undefined && effort !== null && !["low", "medium", "high"].includes(effort)) {
      invalid(`'/reasoning_effort' must be one of 'low', 'medium', 'high'`);
    }
    const kwargs = input.chat_template_kwargs;
    if (kwargs !== undefined) {
      if (!isPlainObject(kwargs)) invalid("Type mismatch of '/chat_template_kwargs', 'object' expected");
      for (const key of ["enable_thinking", "clear_thinking"]) {
        if (kwargs[key] !== undefined && typeof kwargs[key] !== "boolean") invalid(`Type mismatch of '/chat_template_kwargs/${key}'`);
      }
    }
  } else if (!inRange(input.temperature, 0, 5)) {
    invalid("'/temperature' must be from 0 to 5");
  }
  return entry;
}

/** Whether, and for how long, the model reasons before answering. */
function thinking(entry, input) {
  switch (entry.think) {
    case "enable_thinking":
    case "thinking":
      return input.chat_template_kwargs?.[entry.think] === false ? 0 : THINK_MS;
    case "effort":
      return EFFORT_MS[input.reasoning_effort ?? "medium"];
    default:
      return 0;
  }
}

// The worker's marker for a turn that carries command results (src/chat/rounds.rs).
const RESULTS = "[Results of your commands, from the room's sandbox]";

// What the model answers, by the user's message (the last user turn that is
// not a results turn):
//   raw <text>        <text> exactly (e.g. with <run> tags)
//   ansi <text>       <text> wrapped in terminal escape sequences
//   fail              throws, like an overloaded model
//   stall             never answers
//   slow <ms> [t]     after <ms>, <t> exactly, or "slept <ms>"
//   context           the JSON of every [role, content] it was given, with < escaped
//   steps <cmd>       runs <cmd>; once it sees the results, answers "saw: <its stdout>"
//   forever           runs "echo <round>" in every answer, never done
//   greedy            asks for five commands in every answer
//   fail-after <cmd>  runs <cmd>, then fails when asked again
//   slow-after <ms> <cmd>  runs <cmd>, then takes <ms> to answer again
//   anything else     "echo: <message>"
// Asked again after command results, the one-shot scripts answer "Done.".
export function script(messages) {
  const isResults = (m) => m.role === "user" && m.content.startsWith(RESULTS);
  const at = messages.findLastIndex((m) => m.role === "user" && !isResults(m));
  const asked = messages[at].content;
  const round = messages.slice(at + 1).filter(isResults).length;
  const results = messages.findLast(isResults)?.content ?? "";
  const [word, ...rest] = asked.split(" ");
  const arg = rest.join(" ");
  switch (word) {
    case "steps":
      return round === 0 ? `Let me check. <run>${arg}</run>` : `saw: ${stdoutOf(results)}`;
    case "forever":
      return `Round ${round}. <run>echo ${round}</run>`;
    case "greedy":
      return Array.from({ length: 5 }, (_, i) => `<run>echo ${round}-${i}</run>`).join("");
    case "fail-after":
      if (round === 0) return `<run>${arg}</run>`;
      throw new AiError(3040, "Capacity temporarily exceeded, please try again.", 429);
    case "slow-after": {
      const [ms, ...cmd] = rest;
      if (round === 0) return `<run>${cmd.join(" ")}</run>`;
      return sleep(Number(ms)).then(() => "late answer");
    }
  }
  if (round > 0) return "Done.";
  const last = asked;
  if (last.startsWith("raw ")) return last.slice(4);
  if (last.startsWith("ansi ")) return `\u001b[1m${last.slice(5)}\u001b[0m\u001b]0;title\u0007`;
  if (last === "fail") throw new AiError(3040, "Capacity temporarily exceeded, please try again.", 429);
  if (last === "stall") return new Promise(() => {});
  if (last.startsWith("slow ")) {
    const [, ms, text] = last.match(/^slow (\d+)(?: ([\s\S]*))?$/);
    return new Promise((resolve) => setTimeout(() => resolve(text ?? `slept ${ms}`), Number(ms)));
  }
  // Escaped so that the system prompt's example <run> tag is not run.
  if (last === "context") return JSON.stringify(messages.map((m) => [m.role, m.content])).replaceAll("<", "\\u003c");
  return `echo: ${last}`;
}

/** The stdout of the first command in a results turn, trimmed. */
function stdoutOf(results) {
  const m = /\nstdout:(?: \(empty\)|\n([\s\S]*?))\nstderr:/.exec(results);
  if (!m) return "(none)";
  return m[1] === undefined ? "(empty)" : m[1].trim();
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const usage = (completion) => ({ prompt_tokens: 10, completion_tokens: completion, total_tokens: 10 + completion });
let answered = 0;

/** Runs `model` on `input` as the service does; resolves to the answer body. */
async function run(model, input) {
  const entry = check(model, input);
  const thinkMs = thinking(entry, input);
  const budget = input.max_completion_tokens ?? input.max_tokens ?? (entry.shape === "chat" ? 4096 : 256);
  const thoughts = thinkMs > 0 ? "The user wants something. Let me think about which command to run first..." : null;
  if (thinkMs > 0) await sleep(thinkMs);
  const spent = thinkMs > 0 && budget <= THINK_TOKENS;
  const text = spent ? null : await script(input.messages);
  if (entry.shape === "response") {
    const response = entry.think === "inline" ? `Okay, the user asked for this; I will answer plainly.\n</think>\n\n${text}` : text;
    return { response, usage: usage(8) };
  }
  answered += 1;
  const message = { role: "assistant", content: text, refusal: null };
  if (thoughts) message[entry.reasoningField ?? "reasoning_content"] = thoughts;
  return {
    id: `chatcmpl-${answered}`,
    object: "chat.completion",
    created: Math.floor(Date.now() / 1000),
    model,
    choices: [{ index: 0, message, finish_reason: spent ? "length" : "stop", logprobs: null }],
    usage: usage(spent ? budget : 8),
  };
}

/**
 * The service on loopback. `requests` records each call's model and inputs.
 * Give `url` to the binding as its remote-proxy connection string.
 */
export async function startAiStandin() {
  const requests = [];
  const server = http.createServer(async (req, res) => {
    const send = (status, body) => {
      // Marks the answer as the service's own, which the proxy client passes on as it is.
      res.writeHead(status, { "content-type": "application/json", "MF-Forwarded-Response": "1" });
      res.end(JSON.stringify(body));
    };
    let raw = "";
    for await (const chunk of req) raw += chunk;
    const target = new URL(req.headers["mf-url"] ?? "http://invalid/");
    const model = req.headers["mf-header-cf-consn-model-id"];
    const gatewayPath = target.pathname === "/ai-gateway/run";
    if (req.method !== "POST" || target.host !== "workers-binding.ai" || !(target.pathname === "/run" || gatewayPath)) {
      return send(404, { internalCode: 3003, name: "AiError", message: "not found", description: `Request is missing headers or body: ${target}` });
    }
    try {
      const { inputs, options } = JSON.parse(raw);
      if (gatewayPath && typeof options?.gateway?.id !== "string") throw new AiError(2001, "a gateway request needs options.gateway.id");
      // What the binding's third argument became: its `extraHeaders` as
      // request headers, the rest (`gateway`) in the body's `options`.
      requests.push({ model, inputs, options, session: req.headers["mf-header-x-session-affinity"] });
      send(200, await run(model, inputs));
    } catch (e) {
      if (!(e instanceof AiError)) throw e;
      send(e.status, { internalCode: e.code, name: "AiError", message: e.message, description: e.description });
    }
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${server.address().port}/`,
    requests,
    close: () => new Promise((resolve) => { server.closeAllConnections(); server.close(resolve); }),
  };
}

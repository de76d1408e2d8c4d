// A scripted stand-in for the Workers AI service, modelling today's catalog
// as Cloudflare documents it (model schemas, the 2026-05-08 deprecations,
// the platform's error codes), not as the worker happens to call it.
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
// Tool calls, for the models whose catalog entry lists "Function calling"
// (all but Llama 3.1 8B fast and DeepSeek R1 Distill); the others refuse
// `tools` (the strict reading: their schemas still name `tools`, but the
// catalog says they do not call functions). Two schemas:
// - OpenAI-style models: `tools` items `{type: "function", function: {name,
//   description?, parameters?, strict?}}`; `tool_choice` one of "none",
//   "auto", "required" or `{type: "function", function: {name}}`; assistant
//   turns may carry `tool_calls` (`{id, type: "function", function: {name,
//   arguments: "<JSON text>"}}`) with `content` null; `tool` turns need
//   `content` and `tool_call_id`. Refusals are the vLLM backends' `8001:
//   Invalid input` (so `tool_choice: "any"` and `description: false`);
//   answers carry `message.tool_calls` (or streamed `delta.tool_calls`) with
//   `finish_reason: "tool_calls"`; Kimi's call ids are
//   `functions.<name>:<index>`, the same in every answer;
// - the older schema (Llama 3.3, gpt-oss): a tool is `{name, description,
//   parameters}` or `{type, function: {...}}`, description and parameters
//   required, the parameters `{type, properties}` with a `type` and a
//   `description` for every property; every turn's `content` is a string.
//   Llama 3.3 answers, as the function-calling guide shows, with a top-level
//   `tool_calls: [{name, arguments: {...}}]` (no ids; streamed in the last
//   event, where the docs say nothing); gpt-oss answers a `chat.completion`.
// For every model, as OpenAI's API refuses it and the strict reading where
// Workers AI's docs are silent: a function name matches [a-zA-Z0-9_-]{1,64};
// `tool_choice` needs `tools` and names one of them; every `tool` turn
// answers a call of the assistant turn before it (other tool turns between),
// and every call is answered before the next other turn.
//
// Input is validated as the schemas say: an object with a non-empty
// `messages` array of well-formed turns (a `Map`, which serde_wasm_bindgen
// makes of a JSON map, reaches the service as `{}`), and typed known
// properties. Failures answer as the service does: an HTTP error whose body
// names the error (`AiError`) and its internal code.
//
// Sources (2026-12):
// - model pages and their schemas, developers.cloudflare.com/workers-ai/
//   models/<name> (cloudflare-docs src/content/workers-ai-models/*.json):
//   "function_calling" is listed for glm-4.7-flash, glm-5.3-flash,
//   gemma-4-26b-a4b-it, nemotron-3-120b-a12b, qwen3.8-27b, kimi-k2.6,
//   gpt-oss-20b, gpt-oss-120b and llama-3.3-70b-instruct-fp8-fast, not for
//   llama-3.1-8b-instruct-fast or deepseek-r1-distill-qwen-32b; the tool,
//   tool_choice, message, stream and output schemas above are theirs;
// - streaming: the Workers AI "Streaming" guide (github.com/cloudflare/
//   cloudflare-docs/pull/19018: `data: {"response": ...}` events ending in
//   `data: [DONE]`); chunk shapes as captured in cloudflare/ai
//   packages/workers-ai-provider/test/stream-text.test.ts;
// - function calling: developers.cloudflare.com/workers-ai/features/
//   function-calling/traditional/ (the top-level `tool_calls` answer);
// - `8001: Invalid input` for `tool_choice: "any"` and `description: false`
//   (kimi, llama-4-scout, glm-4.7-flash): cloudflare/ai
//   packages/workers-ai-provider/CHANGELOG.md, 3.1.6; Kimi's call ids,
//   repeated from turn to turn: the same file, 3.1.14, and its
//   test/stream-text.test.ts;
// - the binding: workerd src/cloudflare/internal/ai-api.ts (`Ai.run`, as
//   built into workerd 1.20261117); Miniflare's remote-proxy client,
//   src/workers/shared/remote-proxy-client.worker.ts (`makeFetch`, which
//   hands a marked answer back as `new Response(response.body, response)`);
// - OpenAI's rules: platform.openai.com/docs/api-reference/chat/create
//   (function names; `stream_options.include_usage`); its refusals of an
//   unanswered or a stray tool call, as github.com/FoundationAgents/
//   OpenManus/issues/744 and github.com/aliasrobotics/cai/issues/111 quote.
//
// What a model answers depends on the last user message (see `script`).
import http from "node:http";

import { sleep } from "./wait.mjs";

const RETIRED = new Set([
  "@cf/moonshotai/kimi-k2.5", "@hf/meta-llama/meta-llama-3-8b-instruct", "@cf/meta/llama-3-8b-instruct",
  "@cf/meta/llama-3-8b-instruct-awq", "@cf/meta/llama-3.1-8b-instruct", "@cf/meta/llama-3.1-8b-instruct-awq",
  "@cf/meta/llama-3.1-70b-instruct", "@cf/meta/llama-2-7b-chat-int8", "@cf/meta/llama-2-7b-chat-fp16",
  "@cf/mistral/mistral-7b-instruct-v0.1", "@hf/mistral/mistral-7b-instruct-v0.2", "@hf/google/gemma-7b-it",
  "@cf/google/gemma-3-12b-it", "@hf/nousresearch/hermes-2-pro-mistral-7b", "@cf/microsoft/phi-2",
  "@cf/defog/sqlcoder-7b-2", "@cf/unum/uform-gen2-qwen-500m", "@cf/facebook/bart-large-cnn",
]);

// shape: "response" or "chat"; think: how the model reasons; tools: whether
// the catalog lists function calling.
const CATALOG = new Map([
  ["@cf/meta/llama-3.3-70b-instruct-fp8-fast", { shape: "response", think: "never", tools: true }],
  ["@cf/meta/llama-3.1-8b-instruct-fast", { shape: "response", think: "never", tools: false }],
  ["@cf/deepseek-ai/deepseek-r1-distill-qwen-32b", { shape: "response", think: "inline", tools: false }],
  ["@cf/zai-org/glm-4.7-flash", { shape: "chat", think: "enable_thinking", tools: true }],
  ["@cf/zai-org/glm-5.3-flash", { shape: "chat", think: "enable_thinking", tools: true }],
  ["@cf/google/gemma-4-26b-a4b-it", { shape: "chat", think: "enable_thinking", tools: true }],
  ["@cf/nvidia/nemotron-3-120b-a12b", { shape: "chat", think: "enable_thinking", tools: true }],
  ["@cf/qwen/qwen3.8-27b", { shape: "chat", think: "enable_thinking", tools: true }],
  ["@cf/moonshotai/kimi-k2.6", { shape: "chat", think: "thinking", reasoningField: "reasoning", tools: true, kimiCallIds: true }],
  ["@cf/openai/gpt-oss-20b", { shape: "chat", think: "effort", legacyInput: true, tools: true }],
  ["@cf/openai/gpt-oss-120b", { shape: "chat", think: "effort", legacyInput: true, tools: true }],
]);

/** How long thinking takes: longer than the tests' model time limits. */
export const THINK_MS = 2500;
const EFFORT_MS = { low: 50, medium: THINK_MS, high: 2 * THINK_MS };
/** Output tokens that thinking alone uses up. */
const THINK_TOKENS = 256;
const THOUGHTS = "The user wants something. Let me think about which command to run first...";
const INLINE_THOUGHTS = "Okay, the user asked for this; I will answer plainly.\n</think>\n\n";
const CHAT_ROLES = new Set(["system", "developer", "user", "assistant", "tool"]);
const TOOL_NAME = /^[a-zA-Z0-9_-]{1,64}$/;
const TOOL_CHOICES = ["none", "auto", "required"];

/** A failure of the service, answered with `status`. */
class AiError extends Error {
  constructor(code, description, status = 400, why = description) {
    super(`${code}: ${why}`);
    Object.assign(this, { code, description, status });
  }
}

function invalid(why) {
  throw new AiError(5006, `Error: ${why}`);
}

/** Refuses input the way `entry`'s backend does: vLLM's terse 8001, or the schema check's 5006. */
function refuse(entry, why) {
  if (entry.shape === "chat" && !entry.legacyInput) throw new AiError(8001, "Invalid input", 400, `Invalid input (${why})`);
  invalid(why);
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

/** The older schema's `parameters`: `{type, properties}`, every property typed and described. */
function checkLegacyParameters(parameters, at, fail) {
  if (!isPlainObject(parameters) || typeof parameters.type !== "string" || !isPlainObject(parameters.properties)) {
    fail(`'${at}/parameters' must be an object with 'type' and 'properties'`);
  }
  for (const [name, p] of Object.entries(parameters.properties)) {
    if (!isPlainObject(p) || typeof p.type !== "string" || typeof p.description !== "string") {
      fail(`'${at}/parameters/properties/${name}' needs a string 'type' and 'description'`);
    }
  }
  if (parameters.required !== undefined && !(Array.isArray(parameters.required) && parameters.required.every((r) => typeof r === "string"))) {
    fail(`'${at}/parameters/required' must be an array of strings`);
  }
}

/** The tools offered; returns their names. */
function checkTools(tools, legacy, fail) {
  if (!Array.isArray(tools) || tools.length === 0) fail("'/tools' must be a non-empty array");
  return tools.map((tool, i) => {
    const at = `/tools/${i}`;
    const flat = legacy && isPlainObject(tool) && tool.type === undefined && tool.function === undefined;
    const fn = flat ? tool : tool?.function;
    if (!isPlainObject(tool) || (!flat && tool.type !== "function") || !isPlainObject(fn)) fail(`'${at}' must be a function tool`);
    if (typeof fn.name !== "string" || !TOOL_NAME.test(fn.name)) fail(`'${at}' must have a name of [a-zA-Z0-9_-]{1,64}`);
    if (legacy ? typeof fn.description !== "string" : fn.description !== undefined && typeof fn.description !== "string") {
      fail(`Type mismatch of '${at}/description', 'string' expected`);
    }
    if (legacy) checkLegacyParameters(fn.parameters, at, fail);
    else if (fn.parameters !== undefined && !isPlainObject(fn.parameters)) fail(`Type mismatch of '${at}/parameters', 'object' expected`);
    if (!legacy && fn.strict != null && typeof fn.strict !== "boolean") fail(`Type mismatch of '${at}/strict'`);
    return fn.name;
  });
}

/** An assistant turn's `tool_calls`; returns their ids. */
function checkCalls(calls, i, fail) {
  if (!Array.isArray(calls) || calls.length === 0) fail(`'/messages/${i}/tool_calls' must be a non-empty array`);
  const ids = new Set();
  calls.forEach((c, j) => {
    const fn = c?.function;
    const ok = isPlainObject(c) && typeof c.id === "string" && c.type === "function" && isPlainObject(fn) &&
      typeof fn.name === "string" && typeof fn.arguments === "string";
    if (!ok) fail(`'/messages/${i}/tool_calls/${j}' must be {id, type: "function", function: {name, arguments}} with string id and arguments`);
    if (ids.has(c.id)) fail(`'/messages/${i}/tool_calls' repeats the id ${c.id}`);
    ids.add(c.id);
  });
  return ids;
}

/** Every `tool` turn answers a call of the assistant turn before it, and every call is answered before any other turn. */
function checkToolTurns(messages, fail) {
  let open = new Set(); // calls of the last assistant turn not yet answered
  let exchange = false; // whether the turns since that assistant turn are all tool turns
  let asked = -1;
  const unanswered = () => fail(`the tool call(s) ${[...open].join(", ")} of '/messages/${asked}' have no tool turn`);
  messages.forEach((m, i) => {
    if (m.role === "tool") {
      if (typeof m.tool_call_id !== "string") fail(`'/messages/${i}/tool_call_id' must be a string`);
      if (!exchange || !open.delete(m.tool_call_id)) {
        fail(`'/messages/${i}' (tool_call_id ${m.tool_call_id}) answers no open tool call of the assistant turn before it`);
      }
      return;
    }
    if (open.size > 0) unanswered();
    exchange = m.role === "assistant" && m.tool_calls !== undefined;
    if (exchange) [open, asked] = [checkCalls(m.tool_calls, i, fail), i];
  });
  if (open.size > 0) unanswered();
}

/**
 * Checks a chat request's tool use: `tools`, `tool_choice`,
 * `parallel_tool_calls` and the tool calls of its history. `legacy` applies
 * the older Workers AI schema; `fail(why)` throws.
 */
export function checkToolUse({ tools, tool_choice: choice, parallel_tool_calls: parallel, messages }, { legacy, fail }) {
  const names = tools === undefined ? [] : checkTools(tools, legacy, fail);
  if (choice !== undefined) {
    if (tools === undefined) fail("'/tool_choice' is only allowed with 'tools'");
    const named = isPlainObject(choice) && choice.type === "function" && isPlainObject(choice.function) && typeof choice.function.name === "string";
    if (!TOOL_CHOICES.includes(choice) && !named) fail(`'/tool_choice' must be one of ${TOOL_CHOICES.join(", ")} or {type: "function", function: {name}}`);
    if (named && !names.includes(choice.function.name)) fail(`'/tool_choice' names ${choice.function.name}, which is not among 'tools'`);
  }
  if (parallel !== undefined && typeof parallel !== "boolean") fail("Type mismatch of '/parallel_tool_calls', 'boolean' expected");
  checkToolTurns(messages, fail);
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
  const streamOk = input.stream === undefined || typeof input.stream === "boolean" || (openAiStyle && input.stream === null);
  if (!streamOk) invalid("Type mismatch of '/stream', 'boolean' expected");
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
  if (input.tools !== undefined && !entry.tools) refuse(entry, `${model} does not support function calling ('tools')`);
  checkToolUse(input, { legacy: !openAiStyle, fail: (why) => refuse(entry, why) });
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

/** A turn's text: its string content, or its text parts joined. */
const textOf = (content) => (typeof content === "string" ? content : Array.isArray(content) ? content.map((p) => p?.text ?? "").join("") : "");
const isResults = (m) => m.role === "user" && textOf(m.content).startsWith(RESULTS);

/**
 * The command results the model was last given, one text per command: the
 * tool turns after its last answer, or the blocks of the last results turn
 * (each `$ <cmd>\nexit code …\nstdout:…\nstderr:…`).
 */
function lastResults(messages) {
  const answered = messages.findLastIndex((m) => m.role === "assistant");
  const tools = messages.slice(answered + 1).filter((m) => m.role === "tool").map((m) => textOf(m.content));
  if (tools.length > 0) return tools;
  return textOf(messages.findLast(isResults)?.content).split("\n\n$ ").slice(1);
}

/** The stdout of one command's results, trimmed. */
function stdoutOf(results = "") {
  const m = /\nstdout:(?: \(empty\)|\n([\s\S]*?))\nstderr:/.exec(results);
  if (!m) return "(none)";
  return m[1] === undefined ? "(empty)" : m[1].trim();
}

const saw = (messages) => `saw: ${lastResults(messages).map(stdoutOf).join(" | ")}`;
const runCommand = (args) => ({ name: "run_command", arguments: JSON.stringify(args) });

/** `text` and calls of `run_command` for `commands`, as tool calls when tools were offered, else as <run> tags. */
function runs(tools, text, commands) {
  if (tools) return { text: text || null, calls: commands.map((command) => runCommand({ command })) };
  return [text, commands.map((c) => `<run>${c}</run>`).join("")].filter(Boolean).join(" ");
}

// What the model answers, by the user's message (the last user turn that is
// not a results turn); `tools` says whether tools were offered (tool scripts
// fall back to <run> tags without them). A round is one earlier answer of
// the model after that message (a tool-call answer counts as one).
//   raw <text>        <text> exactly (e.g. with <run> tags)
//   ansi <text>       <text> wrapped in terminal escape sequences
//   fail              throws, like an overloaded model
//   stall             never answers
//   slow <ms> [t]     after <ms>, <t> exactly, or "slept <ms>"
//   context           the JSON of every [role, content] it was given, with < escaped
//   steps <cmd>       runs <cmd>; once it sees the results, answers "saw: <its stdout>"
//   tool <cmd>        "Let me check." and one run_command call; then "saw: <its stdout>"
//   tools <a> ;; <b>  two run_command calls in one answer; then "saw: <stdout a> | <stdout b>"
//   tool-timeout <ms> <cmd>  one call {command, timeoutMs}; then "saw: …"
//   badtool           a call with arguments that are not JSON and a call of an unknown
//                     tool; then "recovered: <JSON of the results it was given>"
//   tagged <cmd>      "Let me check. <run><cmd></run>" even with tools; then "saw: …"
//   forever           runs "echo <round>" in every answer, never done
//   greedy            asks for five commands in every answer
//   fail-after <cmd>  runs <cmd>, then fails when asked again
//   slow-after <ms> <cmd>  runs <cmd>, then takes <ms> to answer again
//   long <n>          n words, "word1 word2 …"
//   cut <text>        <text>; streamed, the connection is cut after it (no finish, no [DONE])
//   stall-mid <text>  <text>; streamed, nothing follows it and the stream never ends
//   anything else     "echo: <message>"
// Asked again after command results, the one-shot scripts answer "Done.".
// An answer is a string, or {text, calls: [{name, arguments}], end}.
export function script(messages, { tools = false } = {}) {
  const at = messages.findLastIndex((m) => m.role === "user" && !isResults(m));
  const asked = at < 0 ? "" : textOf(messages[at].content);
  const round = messages.slice(at + 1).filter((m) => m.role === "assistant").length;
  const [word, ...rest] = asked.split(" ");
  const arg = rest.join(" ");
  switch (word) {
    case "steps":
    case "tagged": // tags whether or not tools were offered, as models do
      return round === 0 ? `Let me check. <run>${arg}</run>` : saw(messages);
    case "tool":
      return round === 0 ? runs(tools, "Let me check.", [arg]) : saw(messages);
    case "tools":
      return round === 0 ? runs(tools, "", arg.split(" ;; ")) : saw(messages);
    case "tool-timeout": {
      const [ms, ...cmd] = rest;
      if (round > 0) return saw(messages);
      return tools ? { text: null, calls: [runCommand({ command: cmd.join(" "), timeoutMs: Number(ms) })] } : `<run>${cmd.join(" ")}</run>`;
    }
    case "badtool":
      if (round > 0) return `recovered: ${JSON.stringify(lastResults(messages))}`;
      return tools ? { text: null, calls: [{ name: "run_command", arguments: '{"command": "ls"' }, { name: "delete_everything", arguments: "{}" }] } : "<run>ls</run>";
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
    return sleep(Number(ms)).then(() => text ?? `slept ${ms}`);
  }
  if (word === "long") return Array.from({ length: Number(arg) }, (_, i) => `word${i + 1}`).join(" ");
  if (word === "cut") return { text: arg, end: "cut" };
  if (word === "stall-mid") return { text: arg, end: "stall" };
  // Escaped so that the system prompt's example <run> tag is not run.
  if (last === "context") return JSON.stringify(messages.map((m) => [m.role, m.content])).replaceAll("<", "\\u003c");
  return `echo: ${last}`;
}

/** The answer `script` gives, as {text, calls, end}; `end` is "done", "cut" or "stall". */
export async function reply(messages, options) {
  const answer = await script(messages, options);
  return typeof answer === "string" ? { text: answer, calls: [], end: "done" } : { calls: [], end: "done", ...answer };
}

/** `text` as the tokens a model streams: pieces of up to four characters. */
export function pieces(text) {
  const chars = Array.from(text ?? "");
  return Array.from({ length: Math.ceil(chars.length / 4) }, (_, i) => chars.slice(4 * i, 4 * i + 4).join(""));
}

export const usage = (completion) => ({ prompt_tokens: 10, completion_tokens: completion, total_tokens: 10 + completion });

/**
 * A chat answer: {id, model, created, text, calls: [{id, name, arguments}],
 * thoughts, reasoningField, finish, usage, end}.
 */
export function chatCompletion(chat) {
  const message = { role: "assistant", content: chat.text, refusal: null };
  if (chat.thoughts) message[chat.reasoningField] = chat.thoughts;
  if (chat.calls.length > 0) {
    message.tool_calls = chat.calls.map(({ id, name, arguments: args }) => ({ id, type: "function", function: { name, arguments: args } }));
  }
  return {
    id: chat.id,
    object: "chat.completion",
    created: chat.created,
    model: chat.model,
    choices: [{ index: 0, message, finish_reason: chat.finish, logprobs: null }],
    usage: chat.usage,
  };
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
async function* responseEvents(answer, { tokenMs, end }) {
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

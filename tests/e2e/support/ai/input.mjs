// What a request to the Workers AI stand-in may carry, checked as strictly
// as the service's schemas say.
//
// Input is validated as the schemas say: an object with a non-empty
// `messages` array of well-formed turns (a `Map`, which serde_wasm_bindgen
// makes of a JSON map, reaches the service as `{}`), and typed known
// properties. Failures answer as the service does (./errors.mjs).
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
// Sources (2026-12):
// - the tool, tool_choice, message and stream schemas: the model pages,
//   developers.cloudflare.com/workers-ai/models/<name> (cloudflare-docs
//   src/content/workers-ai-models/*.json);
// - function calling: developers.cloudflare.com/workers-ai/features/
//   function-calling/traditional/ (the top-level `tool_calls` answer);
// - `8001: Invalid input` for `tool_choice: "any"` and `description: false`
//   (kimi, llama-4-scout, glm-4.7-flash): cloudflare/ai
//   packages/workers-ai-provider/CHANGELOG.md, 3.1.6; Kimi's call ids,
//   repeated from turn to turn: the same file, 3.1.14, and its
//   test/stream-text.test.ts;
// - OpenAI's rules: platform.openai.com/docs/api-reference/chat/create
//   (function names; `stream_options.include_usage`); its refusals of an
//   unanswered or a stray tool call, as github.com/FoundationAgents/
//   OpenManus/issues/744 and github.com/aliasrobotics/cai/issues/111 quote.
import { entryOf } from "./catalog.mjs";
import { AiError } from "./errors.mjs";

const CHAT_ROLES = new Set(["system", "developer", "user", "assistant", "tool"]);
const TOOL_NAME = /^[a-zA-Z0-9_-]{1,64}$/;
const TOOL_CHOICES = ["none", "auto", "required"];

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
export function check(model, input) {
  const entry = entryOf(model);
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

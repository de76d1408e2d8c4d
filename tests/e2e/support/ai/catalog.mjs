// The Workers AI catalog the stand-in models, as Cloudflare documents it
// (model schemas, the 2026-05-08 deprecations, the platform's error codes),
// not as the worker happens to call it:
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
// Tool calls are for the models whose catalog entry lists "Function
// calling" (all but Llama 3.1 8B fast and DeepSeek R1 Distill); what they
// take is in ./input.mjs.
//
// Source (2026-12): the model pages and their schemas, developers.
// cloudflare.com/workers-ai/models/<name> (cloudflare-docs
// src/content/workers-ai-models/*.json): "function_calling" is listed for
// glm-4.7-flash, glm-5.3-flash, gemma-4-26b-a4b-it, nemotron-3-120b-a12b,
// qwen3.8-27b, kimi-k2.6, gpt-oss-20b, gpt-oss-120b and
// llama-3.3-70b-instruct-fp8-fast, not for llama-3.1-8b-instruct-fast or
// deepseek-r1-distill-qwen-32b.
import { AiError } from "./errors.mjs";

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
export const THINK_TOKENS = 256;
export const THOUGHTS = "The user wants something. Let me think about which command to run first...";
export const INLINE_THOUGHTS = "Okay, the user asked for this; I will answer plainly.\n</think>\n\n";

/** `model`'s catalog entry; a retired model, or one not in the catalog, throws as the service does. */
export function entryOf(model) {
  if (RETIRED.has(model)) throw new AiError(5028, "This model was deprecated on 2026-05-30. Please use an alternative model.", 410);
  const entry = CATALOG.get(model);
  if (!entry) throw new AiError(5007, `No such model ${model} or task`);
  return entry;
}

/** Whether, and for how long, the model reasons before answering. */
export function thinking(entry, input) {
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

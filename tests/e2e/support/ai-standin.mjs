// A scripted stand-in for the Workers AI binding, as strict about its input
// as Workers AI: a plain object with a non-empty `messages` array of
// {role, content} strings and only the properties the model accepts. A
// `Map` (what serde_wasm_bindgen makes of a JSON map) is refused, as
// Workers AI refuses it.
//
// What it answers depends on the last user message:
//   raw <text>    answers <text> exactly (e.g. with <run> tags)
//   fail          throws, like an overloaded model
//   stall         never answers
//   slow <ms>     answers "slept <ms>" after <ms>
//   context       answers the JSON of every [role, content] it was given, with < escaped
//   anything else answers "echo: <message>"

const MODELS = new Set(["@cf/meta/llama-3-8b-instruct", "@cf/meta/llama-3.1-8b-instruct"]);
const PROPERTIES = new Set([
  "messages", "prompt", "stream", "max_tokens", "temperature", "top_p", "top_k", "seed",
  "repetition_penalty", "frequency_penalty", "presence_penalty", "raw", "lora", "tools",
  "functions", "response_format",
]);
const ROLES = new Set(["system", "user", "assistant", "tool"]);

function invalid(why) {
  throw new Error(`AiError: 5006: Error: ${why}`);
}

function check(model, input) {
  if (typeof model !== "string" || !MODELS.has(model)) throw new Error(`AiError: 5007: No such model ${model}`);
  if (input === null || typeof input !== "object" || Object.getPrototypeOf(input) !== Object.prototype) {
    invalid("required properties at '/' are 'messages'");
  }
  for (const key of Object.keys(input)) {
    if (!PROPERTIES.has(key)) invalid(`additional property '${key}' not allowed`);
  }
  const { messages, max_tokens } = input;
  if (!Array.isArray(messages) || messages.length === 0) invalid("'/messages' must be a non-empty array");
  messages.forEach((m, i) => {
    if (m === null || typeof m !== "object" || Object.getPrototypeOf(m) !== Object.prototype) invalid(`'/messages/${i}' must be an object`);
    if (!ROLES.has(m.role)) invalid(`'/messages/${i}/role' is not valid`);
    if (typeof m.content !== "string") invalid(`'/messages/${i}/content' must be a string`);
    if (Object.keys(m).some((k) => k !== "role" && k !== "content")) invalid(`'/messages/${i}' has an unknown property`);
  });
  if (max_tokens !== undefined && !(Number.isInteger(max_tokens) && max_tokens >= 1 && max_tokens <= 4096)) {
    invalid("'/max_tokens' must be an integer from 1 to 4096");
  }
  return messages;
}

export function script(messages) {
  const last = messages[messages.length - 1].content;
  if (last.startsWith("raw ")) return last.slice(4);
  if (last === "fail") throw new Error("AiError: 3040: Capacity temporarily exceeded, please try again.");
  if (last === "stall") return new Promise(() => {});
  if (last.startsWith("slow ")) {
    const ms = Number(last.slice(5));
    return new Promise((resolve) => setTimeout(() => resolve(`slept ${ms}`), ms));
  }
  // Escaped so that the system prompt's example <run> tag is not run.
  if (last === "context") return JSON.stringify(messages.map((m) => [m.role, m.content])).replaceAll("<", "\\u003c");
  return `echo: ${last}`;
}

export class Ai {
  async run(model, input) {
    const messages = check(model, input);
    return { response: await script(messages) };
  }
}

export default function () {
  return new Ai();
}

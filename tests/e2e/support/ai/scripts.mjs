// The scripted answers of the AI stand-ins: what a model answers depends on
// the last user message (see `script`), and on the command results it was
// given since.
import { sleep } from "../wait.mjs";
import { AiError } from "./errors.mjs";

// The worker's marker for a turn that carries command results (src/exchange/rounds.rs).
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
//   job <tool> <cmd>  a start_job call of <cmd>; a second later, a call of <tool>
//                     (job_status or stop_job) on the job it started; then
//                     "heard: <JSON of the results it was given>"
//   calls <json>      calls of the tools <json> names ([[name, arguments], ...]) in one
//                     answer; then "heard: <JSON of the results it was given>"
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
    case "job": {
      const [tool, ...cmd] = rest;
      if (round === 0) return { text: null, calls: [{ name: "start_job", arguments: JSON.stringify({ cmd: cmd.join(" "), name: "bg" }) }] };
      const jobId = /^job (j[0-9a-f]{16}):/m.exec(lastResults(messages).join("\n"))?.[1];
      if (round > 1 || !jobId) return `heard: ${JSON.stringify(lastResults(messages))}`;
      return sleep(1000).then(() => ({ text: "Checking.", calls: [{ name: tool, arguments: JSON.stringify({ jobId }) }] }));
    }
    case "calls":
      if (round > 0) return `heard: ${JSON.stringify(lastResults(messages))}`;
      return { text: null, calls: JSON.parse(arg).map(([name, args]) => ({ name, arguments: JSON.stringify(args) })) };
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

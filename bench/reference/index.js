// The Duet worker written plainly in JavaScript: a reference to measure the
// Rust worker (src/) against (bench/compare.mjs). One module, no
// dependencies. Per request it does what the Rust worker does (as of commit
// a986673; the room's log, the agent's commands and the audit as of
// cde9163), storage included, since on workerd a write costs a commit that
// the response waits for:
//
//   front door: route and room id, optional bearer token (DUET_API_TOKEN,
//     also offered as a WebSocket subprotocol), a declared body length over
//     64 KiB refused, one JSON log line per request; the request itself goes
//     on, body unread, to the room's Durable Object: DuetAgent by room id
//     (chat, history, cleanup) or Sandbox named `sandbox-{roomId}` (exec)
//   DuetAgent: reads the body (at most 64 KiB), validates `{text, userId?}`,
//     records the room's use (its SQLite row at most once a minute, or per
//     tenth of the room's time to live if that is shorter; the expiry alarm
//     once per object instance), asks the model (the `AI` binding, else an
//     OpenAI-compatible server at AI_BASE_URL) with the room's last 20
//     messages (read from SQLite once, then kept in memory alongside the
//     table), the same system prompts, model default, input and tool
//     (`run_command`, offered as AI_TOOLS says), reads each answer as it
//     streams (server-sent events, bounded like the call; an answer cut
//     short keeps what came and says so), runs the commands of its `<run>`
//     tags or tool calls through the Sandbox object (POST
//     /internal/rooms/{roomId}/exec, with the sender's userId) and asks
//     again with their results (a results turn, or a `tool` turn per call;
//     the same rounds and limits), then stores the user and agent messages
//     in one statement, trims the table to 20, gives the room's log both
//     messages in one more call to the Sandbox object (POST
//     /internal/rooms/{roomId}/publish, one event a line: `message` and
//     `message`, or `message` and `failed` when the exchange failed) and
//     answers `{reply, messages}` with the last 20
//   Sandbox: reads and validates `{cmd, timeoutMs?, userId?}`, records the
//     use (the same way, by the idle time), logs the command's start
//     (`command`), calls sandboxd at SANDBOX_URL within the command's bound,
//     logs its output (`output`, per stream, in pieces of at most 16 KiB)
//     or its failure (on stderr) and its end (`command_end`), records it in
//     the audit (200 entries) and passes sandboxd's JSON result through as
//     `{result, sandboxName}`
//   the room's log (`feed_log`, in the Sandbox object's SQLite): one
//     `INSERT ... RETURNING seq` per event (its number from AUTOINCREMENT,
//     the event's JSON as the Rust worker writes it, `type` first), the
//     log's events and bytes counted once per object instance, then kept in
//     memory, and the oldest deleted (`DELETE ... WHERE seq <= ?`) past
//     2,000 events (FEED_LOG_EVENTS lowers it) or 1 MiB; each event's frame
//     (`{"seq": N, ...}`) is made and sent to the room's WebSockets, of
//     which there are none. A cleanup or an expiry forgets the log.
//
// Same statuses and error bodies (`{"error", "details"?}`), same SQLite
// tables where it keeps the same things. Left out, as no benchmark reaches
// them: the web page and the live feed's WebSocket (its route is unknown
// here, and a room never has watchers, so there are none to count when an
// exchange starts, no message sent before the exchange, no `delta` events:
// an answer's pieces are read and, with nobody watching, passed over, as
// the Rust worker passes them over; no streamed output, heartbeats or
// resume), room tokens, invites and their generation (the `access` table),
// MCP, the room's policy and approvals (every command runs, as under the
// default `auto`, and no command is parsed against deny rules), containers
// (sandboxd is always SANDBOX_URL), and an idle sandbox's sleep (its
// workspace is not archived; the alarm only expires the room).
//
// Served by tests/e2e/support/stack.mjs with the bindings of wrangler.toml:
//   startWorker({ buildDir: "bench/reference", vars: { SANDBOX_URL } })
import { DurableObject } from "cloudflare:workers";

// ---- limits (src/api/limits.rs)
const MAX_BODY_BYTES = 64 * 1024;
const MAX_ROOM_ID_CHARS = 128;
const MAX_TEXT_CHARS = 8_000;
const MAX_USER_ID_CHARS = 128;
const MAX_CMD_CHARS = 8_000;
const HISTORY_LIMIT = 20;
const MAX_RUNS_PER_ANSWER = 5;
const MAX_MODEL_CALLS = 4;
const MAX_COMMANDS_PER_MESSAGE = 8;
const MODEL_OUTPUT_CHARS = 2_000;
const SUMMARY_CHARS = 500;
const QUOTED_CMD_CHARS = 200;
const MAX_HISTORY_CONTEXT_CHARS = 16_000;
const MAX_MODEL_ANSWER_CHARS = 8_000;
const AI_TIMEOUT_MS = 15_000;
const MESSAGE_BUDGET_MS = 25_000;
const EXEC_DEFAULT_TIMEOUT_MS = 20_000;
const EXEC_MAX_TIMEOUT_MS = 25_000;
const SANDBOXD_MARGIN_MS = 2_000;
const MIN_MODEL_CALL_MS = 3_000;
const MIN_COMMAND_MS = 1_000;
const SANDBOX_DESTROY_MS = 10_000;
const COLD_START_ALLOWANCE_MS = 15_000;
const EXEC_ANSWER_MS = 28_000;
const SANDBOX_IDLE_SECONDS = 600;
const ROOM_TTL_SECONDS = 3 * 24 * 3600;
const AUDIT_ENTRIES = 200;
const AUDIT_CMD_CHARS = 500;
const DELTA_INTERVAL_MS = 100;
const MAX_STREAM_BYTES = 1024 * 1024;

// ---- the model (src/ai, src/exchange/context.rs, src/exchange/tools.rs)
const DEFAULT_MODEL = "@cf/zai-org/glm-4.7-flash";
const MAX_OUTPUT_TOKENS = 512;
const CATALOG = "https://developers.cloudflare.com/workers-ai/models/";
const RUN_COMMAND = "run_command";
// How the model is told to run commands: by `<run>` tags, or by calling its tool.
const HOW_TO_RUN = {
  tags: `To run a command, write it exactly, alone, inside <run>...</run>, for example \
<run>ls -la</run>. Use at most ${MAX_RUNS_PER_ANSWER} <run> tags in one answer. After your answer \
the commands run in order, and you get their results (exit code and output) in a message \
marked as coming from the sandbox; you may then run more commands the same way, or give your \
final answer without <run> tags.`,
  tools: `To run a command, call the ${RUN_COMMAND} tool; call it at most ${MAX_RUNS_PER_ANSWER} \
times in one answer. After your answer the commands run in order, and you get each result (exit \
code and output) back; you may then run more commands the same way, or give your final answer \
without calling it. For anything that may take longer than a few seconds (installs, builds, \
test suites, servers), start a job with start_job and check on it with job_status rather than \
waiting for it; stop_job stops one. To look at files use read_file and list_files; to change \
one, use edit_file (one exact match) or write_file (the whole file) rather than shell commands.`,
};
const systemPrompt = (how) => `You are Duet, a pair-programming assistant in a shared \
terminal room. Several people may talk to you; be concise and practical. You can run shell \
commands in the room's Linux sandbox (bash; files and the working directory persist between \
commands). ${how} You have at most ${MAX_MODEL_CALLS} answers and \
${MAX_COMMANDS_PER_MESSAGE} commands per user message, so plan them. Everyone in the room sees \
your answers and a short summary of each command's output. Never invent or predict a \
command's output. Only run commands that help with what was asked; never run destructive \
commands unless asked.`;
const SYSTEM_PROMPTS = { tags: systemPrompt(HOW_TO_RUN.tags), tools: systemPrompt(HOW_TO_RUN.tools) };
// The agent's tools, as the model's input carries them (`tools`). This worker
// has no jobs and no file tools: it offers their tools, as the Rust worker
// does, and answers their calls with an error turn saying so.
const TOOLS = JSON.parse(`[{"type": "function", "function": {
  "name": "${RUN_COMMAND}",
  "description": "Run a shell command in the room's Linux sandbox (bash; files and the working directory persist between commands) and get its exit code, stdout and stderr. Everyone in the room sees the command and its output. At most ${MAX_RUNS_PER_ANSWER} commands per answer.",
  "parameters": {"type": "object", "properties": {
    "command": {"type": "string", "description": "The command, exactly as it would be typed in bash."},
    "timeoutMs": {"type": "integer", "minimum": 1, "maximum": ${EXEC_MAX_TIMEOUT_MS}, "description": "How long the command may run, in milliseconds (at most ${EXEC_MAX_TIMEOUT_MS}; the room's time budget may allow less)."}
  }, "required": ["command"]}
}},
{"type": "function", "function": {"name": "start_job", "description": "Start a command as a background job in the room's sandbox; answers at once with its id. Use it for anything that may take longer than a few seconds (installs, builds, test suites, servers).", "parameters": {"type": "object", "properties": {"cmd": {"type": "string", "description": "The command, exactly as it would be typed in bash."}, "name": {"type": "string", "description": "A short label for people."}}, "required": ["cmd"]}}},
{"type": "function", "function": {"name": "job_status", "description": "A job's state (running, exited, stopped or lost), its exit code once it ended, and the last 2000 bytes of its output.", "parameters": {"type": "object", "properties": {"jobId": {"type": "string", "description": "The job's id, as start_job gave it."}}, "required": ["jobId"]}}},
{"type": "function", "function": {"name": "stop_job", "description": "Stop a running job and get its state.", "parameters": {"type": "object", "properties": {"jobId": {"type": "string", "description": "The job's id, as start_job gave it."}}, "required": ["jobId"]}}},
{"type":"function","function":{"name":"read_file","description":"Read a text file of the room's workspace as numbered lines (at most 2000 a call, 500 unless limit says; offset reads on).","parameters":{"type":"object","properties":{"path":{"type":"string","description":"Relative to the workspace."},"offset":{"type":"integer","minimum":1},"limit":{"type":"integer","minimum":1,"maximum":2000}},"required":["path"]}}},{"type":"function","function":{"name":"list_files","description":"List a directory of the room's workspace: an entry a line, directories ending in /.","parameters":{"type":"object","properties":{"path":{"type":"string","description":"Relative to the workspace; the workspace itself when left out."}}}}},{"type":"function","function":{"name":"write_file","description":"Write a file of the room's workspace whole (created with its directories, or replaced). To change part of a file, use edit_file.","parameters":{"type":"object","properties":{"path":{"type":"string"},"content":{"type":"string"}},"required":["path","content"]}}},{"type":"function","function":{"name":"edit_file","description":"Change a text file: the one place where old_text occurs becomes new_text. old_text must match exactly once; include the lines around it to make it unique.","parameters":{"type":"object","properties":{"path":{"type":"string"},"old_text":{"type":"string"},"new_text":{"type":"string"}},"required":["path","old_text","new_text"]}}}]`);
const RESULTS_HEADER = "[Results of your commands, from the room's sandbox]";

// ---- errors (src/api/error.rs): every failure is an ApiError with its status
// (The Rust worker also names its web page and live feed, which this one lacks.)
const ENDPOINTS = "GET /health, HEAD /health, POST /api/rooms/{roomId}/message, \
POST /api/rooms/{roomId}/messages, GET /api/rooms/{roomId}/messages, \
POST /api/rooms/{roomId}/sandbox/exec, DELETE /api/rooms/{roomId}";

class ApiError extends Error {
  constructor(status, message, { details, allow } = {}) {
    super(message);
    this.status = status;
    this.details = details;
    this.allow = allow;
  }
}
const invalid = (details) => new ApiError(400, "invalid request", { details });
const badJson = (why) => new ApiError(400, `request body is not valid JSON: ${why}`);
const notAnObject = () => new ApiError(400, "request body must be a JSON object");
const unreadableBody = (why) => new ApiError(400, `request body could not be read: ${why}`);
const unauthorized = () => new ApiError(401, "missing or wrong bearer token");
const crossSite = (origin) => new ApiError(403, `cross-site request refused: the Origin ${origin} is not this worker's own`);
const notJson = () => new ApiError(415, "the request body must be JSON, sent with Content-Type: application/json");
const notFound = () => new ApiError(404, `no such endpoint; supported: ${ENDPOINTS}`);
const methodNotAllowed = (allow) => new ApiError(405, `method not allowed; allowed: ${allow}`, { allow });
const cleanedUp = () => new ApiError(409, "the room was cleaned up while this request was in flight; nothing of it was kept");
const payloadTooLarge = () => new ApiError(413, `request body too large: the limit is ${MAX_BODY_BYTES} bytes`);
const internal = (why) => new ApiError(500, `internal error: ${why}`);
const aiFailed = (why) => new ApiError(502, `AI backend failed: ${why}`);
const sandboxFailed = (why) => new ApiError(502, `sandbox failed: ${why}`);
const aiUnavailable = (why) => new ApiError(503, `no AI backend: ${why}`);
const notConfigured = (why) => new ApiError(503, `the worker is not configured: ${why}`);
const sandboxUnavailable = (why) => new ApiError(503, `sandbox unavailable: ${why}`);
const aiBusy = (why) => new ApiError(503, `AI backend is busy: ${why}`);
const aiTimeout = (ms) => new ApiError(504, `AI backend did not answer within ${ms} ms`);
const sandboxTimeout = (ms) => new ApiError(504, `sandbox did not answer within ${ms} ms`);

/** Anything thrown, as an ApiError (a runtime failure is a 500). */
const asApiError = (e) => (e instanceof ApiError ? e : internal(e?.message ?? String(e)));

function json(status, body) {
  return new Response(JSON.stringify(body), { status, headers: { "content-type": "application/json" } });
}

function errorResponse(e) {
  const body = e.details ? { error: e.message, details: e.details } : { error: e.message };
  const headers = { "content-type": "application/json" };
  if (e.allow) headers.allow = e.allow;
  return new Response(JSON.stringify(body), { status: e.status, headers });
}

const log = (line) => console.log(JSON.stringify(line));

// ---- settings (src/runtime/config.rs): a blank value counts as unset
function setting(env, name) {
  const value = env[name];
  return typeof value === "string" && value.trim() !== "" ? value : undefined;
}
function number(env, name, fallback, max) {
  const value = setting(env, name)?.trim();
  return value !== undefined && /^\d+$/.test(value) ? Math.min(Math.max(Number(value), 1), max) : fallback;
}
const secondsAsMs = (env, name, fallback) => number(env, name, fallback, Number.MAX_SAFE_INTEGER / 1000) * 1000;

// ---- text (src/text.rs)
/** Characters (code points) in `s`. */
function charCount(s) {
  let n = s.length;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c >= 0xd800 && c <= 0xdbff) {
      n--;
      i++;
    }
  }
  return n;
}
/** The longest prefix of `s` with at most `n` characters. */
function firstChars(s, n) {
  if (s.length <= n) return s;
  let i = 0;
  for (let count = 0; i < s.length && count < n; count++) {
    const c = s.charCodeAt(i);
    i += c >= 0xd800 && c <= 0xdbff ? 2 : 1;
  }
  return s.slice(0, i);
}
// Terminal control sequences (CSI; OSC, DCS, SOS, PM, APC up to BEL or ST;
// two-character escapes) and control characters other than \n and \t.
const CONTROLS = /\x1b(?:\[[^\x40-\x7e]*[\x40-\x7e]?|[\]PX^_][\s\S]*?(?:\x07|\x1b\\|$)|[\s\S]?)|[\x00-\x08\x0b-\x1f\x7f-\x9f]/gu;
const withoutControls = (s) => s.replace(CONTROLS, "");

// ---- routes (src/api/route.rs)
/** `{action, room?}` for a method and a still percent-encoded path. */
function parseRoute(method, path) {
  if (path === "/health") {
    if (method === "GET" || method === "HEAD") return { action: "health" };
    throw methodNotAllowed("GET, HEAD");
  }
  if (!path.startsWith("/api/rooms/")) throw notFound();
  const rest = path.slice("/api/rooms/".length);
  const slash = rest.indexOf("/");
  const segment = slash < 0 ? rest : rest.slice(0, slash);
  const tail = slash < 0 ? "" : rest.slice(slash + 1);
  let action;
  if (tail === "") {
    if (method !== "DELETE") throw methodNotAllowed("DELETE");
    action = "cleanup";
  } else if (tail === "message") {
    if (method !== "POST") throw methodNotAllowed("POST");
    action = "message";
  } else if (tail === "messages") {
    if (method === "POST") action = "message";
    else if (method === "GET") action = "history";
    else throw methodNotAllowed("GET, POST");
  } else if (tail === "sandbox/exec") {
    if (method !== "POST") throw methodNotAllowed("POST");
    action = "exec";
  } else {
    throw notFound();
  }
  return { action, room: roomId(segment) };
}

// ---- calls between a room's two objects (src/room/calls.rs): paths under
// /internal/rooms/, which the front door never routes. The DuetAgent sends
// the Sandbox object the agent's commands (`exec`), events for the room's
// log (`publish`), the room's end (`destroy`) and its history's expiry
// (`expired`).
const INTERNAL = "/internal/rooms/";
const CALLS = new Map([
  ["exec", "POST"],
  ["publish", "POST"],
  ["expired", "POST"],
  ["destroy", "POST"],
]);
const internalPath = (room, call) => `${INTERNAL}${room}/${call}`;

/**
 * A room's route, as the objects see it: `{room, action}` for a public one
 * (/health never reaches them), `{room, call}` for a call from the other.
 */
function objectRoute(method, path) {
  if (path.startsWith(INTERNAL)) {
    const rest = path.slice(INTERNAL.length);
    const slash = rest.indexOf("/");
    const call = rest.slice(slash + 1);
    if (slash < 0 || CALLS.get(call) !== method) throw notFound();
    return { room: roomId(rest.slice(0, slash)), call };
  }
  const route = parseRoute(method, path);
  if (route.action === "health") throw notFound();
  return route;
}

const utf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

function roomId(segment) {
  const bad = (why) => invalid({ roomId: [why] });
  let decoded = segment;
  if (segment.includes("%")) {
    const bytes = [];
    for (let i = 0; i < segment.length; ) {
      if (segment[i] === "%") {
        const hex = segment.slice(i + 1, i + 3);
        if (!/^[0-9A-Fa-f]{2}$/.test(hex)) throw bad("is not valid percent-encoded UTF-8");
        bytes.push(parseInt(hex, 16));
        i += 3;
      } else {
        bytes.push(segment.charCodeAt(i)); // a URL path is ASCII
        i += 1;
      }
    }
    try {
      decoded = utf8.decode(new Uint8Array(bytes));
    } catch {
      throw bad("is not valid percent-encoded UTF-8");
    }
  }
  if (decoded === "") throw bad("must not be empty");
  if (charCount(decoded) > MAX_ROOM_ID_CHARS) throw bad(`must be at most ${MAX_ROOM_ID_CHARS} characters`);
  if (!/^[A-Za-z0-9._-]+$/.test(decoded)) throw bad("may contain only A-Z, a-z, 0-9, '.', '_' and '-'");
  return decoded;
}

const sandboxName = (room) => `sandbox-${room}`;

// ---- request bodies (src/runtime/body.rs, src/api/validate.rs)
/** Refuses a body whose declared length is over the limit, unread. */
function checkDeclaredLength(req) {
  const declared = req.headers.get("content-length")?.trim();
  if (declared && /^\d+$/.test(declared) && Number(declared) > MAX_BODY_BYTES) throw payloadTooLarge();
}

/** The body, never holding more than MAX_BODY_BYTES of it. */
async function readBody(req) {
  checkDeclaredLength(req);
  if (!req.body) return new Uint8Array(0);
  const reader = req.body.getReader();
  const chunks = [];
  let size = 0;
  for (;;) {
    let step;
    try {
      step = await reader.read();
    } catch (e) {
      throw unreadableBody(e?.message ?? String(e));
    }
    if (step.done) break;
    size += step.value.byteLength;
    if (size > MAX_BODY_BYTES) {
      reader.cancel().catch(() => {});
      throw payloadTooLarge();
    }
    chunks.push(step.value);
  }
  if (chunks.length === 1) return chunks[0];
  const body = new Uint8Array(size);
  let at = 0;
  for (const chunk of chunks) {
    body.set(chunk, at);
    at += chunk.byteLength;
  }
  return body;
}

function jsonObject(bytes) {
  let value;
  try {
    value = JSON.parse(utf8.decode(bytes));
  } catch (e) {
    throw badJson(e.message);
  }
  if (value === null || typeof value !== "object" || Array.isArray(value)) throw notAnObject();
  return value;
}

const own = (object, key) => (Object.hasOwn(object, key) ? object[key] : undefined);

/** Per-field problems, in field-name order as the Rust worker sends them. */
class FieldErrors {
  fields = {};
  add(field, why) {
    (this.fields[field] ??= []).push(why);
  }
  get empty() {
    return Object.keys(this.fields).length === 0;
  }
  sorted() {
    return Object.fromEntries(Object.keys(this.fields).sort().map((k) => [k, this.fields[k]]));
  }
}

function requiredString(object, field, errors) {
  const value = own(object, field);
  if (typeof value === "string") return value;
  errors.add(field, value === undefined || value === null ? "is required" : "must be a string");
  return undefined;
}

function checkText(field, text, maxChars, errors) {
  if (text === "") errors.add(field, "must not be blank");
  else if (charCount(text) > maxChars) errors.add(field, `must be at most ${maxChars} characters`);
  else return text;
  return undefined;
}

/** Chat text: fit for other people's terminals, trimmed. */
const chatText = (text) => withoutControls(text).trim();

/** `{"text": string, "userId"?: string}`. */
function messageRequest(bytes) {
  const object = jsonObject(bytes);
  const errors = new FieldErrors();
  const raw = requiredString(object, "text", errors);
  const text = raw === undefined ? undefined : checkText("text", chatText(raw), MAX_TEXT_CHARS, errors);
  const userId = optionalName(object, "userId", errors);
  if (text === undefined || !errors.empty) throw invalid(errors.sorted());
  return { text, userId };
}

/** Who sent something (`userId`): chat text, or undefined. */
function optionalName(object, field, errors) {
  const name = own(object, field);
  if (typeof name === "string") return checkText(field, chatText(name), MAX_USER_ID_CHARS, errors);
  if (name !== undefined && name !== null) errors.add(field, "must be a string");
  return undefined;
}

/** Why a shell command cannot run, or undefined. */
function commandProblem(cmd) {
  if (cmd.trim() === "") return "must not be empty";
  if (charCount(cmd) > MAX_CMD_CHARS) return `must be at most ${MAX_CMD_CHARS} characters`;
  if (cmd.includes("\0")) return "must not contain NUL characters";
  return undefined;
}

/**
 * `{"cmd": string, "timeoutMs"?: integer, "userId"?: string}`, and from the
 * DuetAgent who let its command run (`decidedBy`, `rule`: unchecked).
 */
function execRequest(bytes) {
  const object = jsonObject(bytes);
  const errors = new FieldErrors();
  const cmd = requiredString(object, "cmd", errors);
  if (cmd !== undefined) {
    const why = commandProblem(cmd);
    if (why) errors.add("cmd", why);
  }
  let timeoutMs = EXEC_DEFAULT_TIMEOUT_MS;
  const asked = own(object, "timeoutMs");
  if (asked !== undefined && asked !== null) {
    if (Number.isInteger(asked) && asked >= 1 && asked <= EXEC_MAX_TIMEOUT_MS) timeoutMs = asked;
    else errors.add("timeoutMs", `must be an integer from 1 to ${EXEC_MAX_TIMEOUT_MS}`);
  }
  const userId = optionalName(object, "userId", errors);
  const said = (field) => (typeof own(object, field) === "string" ? object[field] : null);
  if (cmd === undefined || !errors.empty) throw invalid(errors.sorted());
  return { cmd, timeoutMs, userId, decidedBy: said("decidedBy"), rule: said("rule") };
}

// ---- bounded waits (src/runtime/timeout.rs)
const TIMED_OUT = Symbol("timed out");
/** The promise's value, or TIMED_OUT if `ms` pass first. */
function within(ms, promise) {
  let timer;
  const late = new Promise((resolve) => {
    timer = setTimeout(resolve, ms, TIMED_OUT);
  });
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
}

/** The `error` of a JSON error body, or the status. */
async function errorOf(res) {
  const status = res.status;
  try {
    const body = await res.json();
    if (typeof body?.error === "string") return body.error;
  } catch {
    // not JSON
  }
  return `status ${status}`;
}

// ---- the front door (src/front.rs, src/access/presented.rs, src/feed/event.rs)
/** Whether `presented` is `token`, taking the same time wherever they first differ. */
function sameToken(presented, token) {
  let diff = presented.length ^ token.length;
  for (let i = 0; i < Math.max(presented.length, token.length); i++) {
    diff |= (presented.charCodeAt(i) || 0) ^ (token.charCodeAt(i) || 0);
  }
  return diff === 0;
}

/** The token a browser offers as the subprotocol `duet.auth.<base64url>`, if any. */
function tokenFromProtocols(header) {
  const encoded = header
    .split(",")
    .map((p) => p.trim())
    .find((p) => p.startsWith("duet.auth."))
    ?.slice("duet.auth.".length);
  if (encoded === undefined || !/^[A-Za-z0-9_-]*$/.test(encoded) || encoded.length % 4 === 1) return undefined;
  try {
    const binary = atob(encoded.replaceAll("-", "+").replaceAll("_", "/"));
    return utf8.decode(Uint8Array.from(binary, (c) => c.charCodeAt(0)));
  } catch {
    return undefined;
  }
}

/** With DUET_API_TOKEN set, /api/ needs `Authorization: Bearer <token>` (or the token as a subprotocol). */
function checkToken(req, env, path) {
  const token = setting(env, "DUET_API_TOKEN");
  if (token === undefined || !path.startsWith("/api/")) return;
  const header = req.headers.get("authorization") ?? "";
  const offered = tokenFromProtocols(req.headers.get("sec-websocket-protocol") ?? "");
  const byProtocol = offered !== undefined && sameToken(offered, token);
  if (!byProtocol && !sameToken(header.startsWith("Bearer ") ? header.slice(7) : "", token)) throw unauthorized();
}

/** Refuses what another site's page could have sent (src/api/cross_site.rs). */
function checkCrossSite(req, route) {
  const origin = req.headers.get("origin");
  if (["message", "exec", "cleanup"].includes(route.action) && origin !== null && origin.toLowerCase() !== new URL(req.url).origin) {
    throw crossSite(origin);
  }
  const type = (req.headers.get("content-type") ?? "").split(";")[0].trim().toLowerCase();
  if ((route.action === "message" || route.action === "exec") && type !== "application/json") throw notJson();
}

async function dispatch(req, env, route) {
  if (route.action === "health") return new Response("ok");
  checkCrossSite(req, route);
  if (route.action === "message" || route.action === "exec") checkDeclaredLength(req);
  const stub = route.action === "exec" ? env.Sandbox.getByName(sandboxName(route.room)) : env.DUET_AGENT.getByName(route.room);
  try {
    // The request itself, body unread: the object reads it within the same bound.
    return await stub.fetch(req);
  } catch (e) {
    throw internal(e?.message ?? String(e));
  }
}

export default {
  async fetch(req, env) {
    const started = Date.now();
    const method = req.method;
    const path = new URL(req.url).pathname;
    let route, routeError;
    try {
      route = parseRoute(method, path);
    } catch (e) {
      routeError = e;
    }
    let response, error;
    try {
      checkToken(req, env, path);
      if (routeError) throw routeError;
      response = await dispatch(req, env, route);
    } catch (e) {
      const failure = asApiError(e);
      error = failure.message;
      response = errorResponse(failure);
    }
    log({ method, route: route?.action ?? "unknown", room: route?.room, status: response.status, durationMs: Date.now() - started, error });
    return response;
  },
};

/** A Durable Object's handler outcome as a response; a failure is logged with its cause. */
async function objectResponse(object, path, handle) {
  try {
    return await handle();
  } catch (e) {
    const failure = asApiError(e);
    log({ object, path, status: failure.status, error: failure.message });
    return errorResponse(failure);
  }
}

// ---- the model (src/ai)
/** How a family of models is asked (src/ai/input.rs): "classic", "hybrid", "kimi" or "gpt-oss". */
function family(model) {
  const name = model.toLowerCase();
  if (name.includes("gpt-oss")) return "gpt-oss";
  if (name.includes("kimi")) return "kimi";
  if (["glm-", "gemma-4", "nemotron-3", "qwen3", "deepseek-v4"].some((part) => name.includes(part))) return "hybrid";
  return "classic";
}

/** What the model is asked for: always a stream, with the tool when `tools`. */
function modelInput(model, messages, tools) {
  const input = tools ? { messages, stream: true, tools: TOOLS } : { messages, stream: true };
  switch (family(model)) {
    case "gpt-oss":
      return { ...input, max_tokens: MAX_OUTPUT_TOKENS, reasoning_effort: "low" };
    case "kimi":
      return { ...input, max_completion_tokens: MAX_OUTPUT_TOKENS, chat_template_kwargs: { thinking: false } };
    case "hybrid":
      return { ...input, max_completion_tokens: MAX_OUTPUT_TOKENS, chat_template_kwargs: { enable_thinking: false } };
    default:
      return { ...input, max_tokens: MAX_OUTPUT_TOKENS };
  }
}

/** AI_MODEL (else DEFAULT_MODEL), offered the tool as AI_TOOLS says (by default the OpenAI-style families). */
function configuredModel(env) {
  const name = setting(env, "AI_MODEL") ?? DEFAULT_MODEL;
  const tools = setting(env, "AI_TOOLS")?.trim() ?? "auto";
  if (tools === "auto") return { name, tools: ["hybrid", "kimi"].includes(family(name)) };
  if (tools === "on" || tools === "off") return { name, tools: tools === "on" };
  throw notConfigured(`AI_TOOLS is ${JSON.stringify(tools)}; set it to auto, on or off`);
}

/** Text without `<think>` blocks (and thoughts closed by a leading `</think>`). */
function withoutThinking(text) {
  let rest = text;
  const close = rest.indexOf("</think>");
  if (close >= 0 && !rest.slice(0, close).includes("<think>")) rest = rest.slice(close + 8);
  let out = "";
  for (let open = rest.indexOf("<think>"); open >= 0; open = rest.indexOf("<think>")) {
    out += rest.slice(0, open);
    const inside = rest.slice(open + 7);
    const end = inside.indexOf("</think>");
    rest = end >= 0 ? inside.slice(end + 8) : "";
  }
  return out + rest;
}

/**
 * A streamed answer put together (src/ai/stream.rs): server-sent events, in
 * chunks that may split anything. `{response}` pieces, or
 * `chat.completion.chunk` deltas whose text, never their thoughts, is read,
 * and whose tool-call fragments join the call their `index` names.
 */
class Streamed {
  decoder = new TextDecoder();
  line = "";
  data = "";
  text = "";
  calls = [];
  read = 0;
  complete = false; // at `[DONE]` or a finish_reason

  /** Reads a chunk of the stream; answers the text it adds. */
  push(chunk) {
    this.read += chunk.byteLength;
    const lines = (this.line + this.decoder.decode(chunk, { stream: true })).split("\n");
    this.line = lines.pop();
    let added = "";
    for (const whole of lines) {
      const line = whole.endsWith("\r") ? whole.slice(0, -1) : whole;
      if (line === "") {
        const data = this.data;
        this.data = "";
        if (data !== "") added += this.event(data);
      } else if (line.startsWith("data:")) {
        if (this.data !== "") this.data += "\n";
        this.data += line.startsWith("data: ") ? line.slice(6) : line.slice(5);
      }
    }
    return added;
  }

  get overBound() {
    return this.read > MAX_STREAM_BYTES;
  }

  /** One event's data; the text it adds. */
  event(data) {
    if (data.trim() === "[DONE]") {
      this.complete = true;
      return "";
    }
    let event;
    try {
      event = JSON.parse(data);
    } catch {
      return "";
    }
    if (typeof event?.response === "string") {
      this.text += event.response;
      return event.response;
    }
    const choice = event?.choices?.[0];
    if (choice?.finish_reason != null) this.complete = true;
    const delta = choice?.delta;
    if (Array.isArray(delta?.tool_calls)) for (const fragment of delta.tool_calls) this.callFragment(fragment);
    const piece = typeof delta?.content === "string" ? delta.content : "";
    this.text += piece;
    return piece;
  }

  /** Adds a fragment to the call it names (by `index`, else the last); an index far ahead is no call. */
  callFragment(fragment) {
    const { calls } = this;
    const index = Number.isSafeInteger(fragment?.index) && fragment.index >= 0 ? fragment.index : undefined;
    const at = index ?? (typeof fragment?.id === "string" || calls.length === 0 ? calls.length : calls.length - 1);
    if (at > calls.length) return;
    if (at === calls.length) calls.push({ id: `call_${at}`, type: "function", function: { name: "", arguments: "" } });
    const call = calls[at];
    if (typeof fragment?.id === "string") call.id = fragment.id;
    const { name, arguments: part } = fragment?.function ?? {};
    if (typeof name === "string") call.function.name += name;
    if (typeof part === "string") call.function.arguments += part;
  }
}

function modelFailure(model, error) {
  const code = /(?:^|:)\s*(\d{4})\s*:/.exec(error)?.[1];
  switch (code) {
    case "5028":
      return `the model ${model} (AI_MODEL) is retired on Workers AI (${error}); set AI_MODEL to a current model from ${CATALOG}`;
    case "5007":
    case "3042":
      return `the model ${model} (AI_MODEL) is unknown to Workers AI (${error}); set AI_MODEL to a model from ${CATALOG}`;
    case "5035":
      return `the model ${model} (AI_MODEL) needs the Workers Paid plan (${error}); upgrade, or set AI_MODEL to a model from ${CATALOG}`;
    default:
      return `Workers AI: ${error}`;
  }
}

/** The binding's event stream (src/ai/workers_ai.rs); undefined where it only runs on Cloudflare. */
async function runBinding(env, model, input, session) {
  const gateway = setting(env, "AI_GATEWAY_ID");
  const options = { extraHeaders: { "x-session-affinity": session }, ...(gateway ? { gateway: { id: gateway } } : {}) };
  let error;
  try {
    const answer = await env.AI.run(model, input, options);
    if (answer instanceof ReadableStream) return answer;
    error = "the binding answered without streaming";
  } catch (e) {
    error = String(e); // as the Rust worker reads it: `AiError: 5007: …`
  }
  if (error.includes("needs to be run remotely")) return undefined;
  if (/(?:^|:)\s*3040\s*:/.test(error)) throw aiBusy(`Workers AI has no capacity for ${model} right now (${error}); try again in a moment`);
  throw aiFailed(modelFailure(model, error));
}

/** The server at AI_BASE_URL as errors name it: scheme, host and port, no credentials (src/ai/openai.rs). */
function origin(baseUrl) {
  const url = baseUrl.trim();
  const scheme = url.indexOf("://");
  const rest = scheme < 0 ? url : url.slice(scheme + 3);
  const authority = rest.split(/[/?#]/)[0];
  const host = authority.slice(authority.lastIndexOf("@") + 1);
  return scheme < 0 ? host : `${url.slice(0, scheme)}://${host}`;
}

/** An OpenAI-compatible server's event stream for `input`. */
async function runServer(baseUrl, key, model, input) {
  const server = origin(baseUrl);
  const base = baseUrl.trim().replace(/\/+$/, "");
  const url = `${base.endsWith("/v1") ? base.slice(0, -3) : base}/v1/chat/completions`;
  const headers = { "content-type": "application/json", ...(key === undefined ? {} : { authorization: `Bearer ${key}` }) };
  let request;
  try {
    request = new Request(url, { method: "POST", headers, body: JSON.stringify({ model, ...input }) });
  } catch {
    throw aiFailed(`AI_BASE_URL is not a usable URL (${server})`);
  }
  let res;
  try {
    res = await fetch(request);
  } catch {
    throw aiFailed(`cannot reach ${server}`);
  }
  if (res.status === 404) throw aiFailed(`${server} answered 404: it has no model ${model} (AI_MODEL), or AI_BASE_URL is not an OpenAI-compatible server`);
  if (res.status < 200 || res.status > 299) throw aiFailed(`${server} answered ${res.status}`);
  const kind = res.headers.get("content-type");
  if (!kind?.startsWith("text/event-stream")) {
    throw aiFailed(`${server} answered without streaming (${kind ?? "no content-type"}); use a server that streams chat completions`);
  }
  if (!res.body) throw aiFailed(`${server} broke off its answer`);
  return res.body;
}

/** The answer's event stream: from the binding when it works, else from AI_BASE_URL (src/ai/mod.rs). */
async function openModel(env, model, session, messages) {
  const input = modelInput(model.name, messages, model.tools);
  if (env.AI) {
    const stream = await runBinding(env, model.name, input, session);
    if (stream) return stream;
  }
  const base = setting(env, "AI_BASE_URL");
  if (base === undefined) {
    throw aiUnavailable(
      env.AI
        ? "the Workers AI binding only runs on Cloudflare (log in and use `wrangler dev --remote`), or set AI_BASE_URL to an OpenAI-compatible server"
        : "bind Workers AI as `AI`, or set AI_BASE_URL to an OpenAI-compatible server",
    );
  }
  return runServer(base, setting(env, "AI_API_KEY"), model.name, input);
}

const aiTimeLimit = (env) => number(env, "AI_TIMEOUT_MS", AI_TIMEOUT_MS, AI_TIMEOUT_MS);

/**
 * The model's answer to `messages`, stream and all within AI_TIMEOUT_MS and
 * `maxMs`: `{text, calls, cut}`, its text as chat text without thoughts,
 * `cut` saying why it stopped coming before it was done, if it did.
 */
async function askModel(env, model, session, messages, maxMs) {
  const limit = Math.min(aiTimeLimit(env), maxMs);
  const deadline = Date.now() + limit;
  const stream = await within(limit, openModel(env, model, session, messages));
  if (stream === TIMED_OUT) throw aiTimeout(limit);
  const reader = stream.getReader();
  const streamed = new Streamed();
  let cut, stalled, ended;
  while (cut === undefined && !streamed.complete) {
    let step;
    try {
      step = await within(Math.max(0, deadline - Date.now()), reader.read());
    } catch (e) {
      cut = `its stream broke off: ${e}`; // `Error: …`, as the Rust worker reads it
      break;
    }
    if (step === TIMED_OUT) {
      stalled = true;
      cut = `nothing more came within ${limit} ms`;
    } else if (step.done) {
      ended = true;
      cut = "its stream ended before the answer did";
    } else {
      // The Rust worker shows each piece's visible text to the room's
      // watchers (src/exchange/shown.rs); a room here never has any.
      streamed.push(step.value);
      if (!streamed.complete && streamed.overBound) cut = `it was over ${MAX_STREAM_BYTES} bytes`;
    }
  }
  if (!ended) reader.cancel().catch(() => {});
  const text = firstChars(withoutControls(withoutThinking(streamed.text).trim()).trim(), MAX_MODEL_ANSWER_CHARS);
  if (text === "" && streamed.calls.length === 0) {
    if (stalled) throw aiTimeout(limit);
    if (cut !== undefined) throw aiFailed(`the answer of the model ${model.name} broke off before any text: ${cut}`);
    throw aiFailed(`the model ${model.name} returned no text`);
  }
  return { text, calls: streamed.calls, cut };
}

// ---- what the model sees (src/exchange/context.rs)
/** The longest suffix of `history` within the context budget, starting with a user turn. */
function recentThatFit(history) {
  let used = 0;
  let start = history.length;
  for (let at = history.length - 1; at >= 0; at--) {
    used += charCount(history[at].text);
    if (used > MAX_HISTORY_CONTEXT_CHARS) break;
    start = at;
  }
  while (start < history.length && history[start].role !== "user") start++;
  return history.slice(start);
}

/** System prompt, history, the new text, then each earlier answer and its results turn or its calls' tool turns. */
function buildContext(history, text, followUps, tools) {
  const messages = [{ role: "system", content: tools ? SYSTEM_PROMPTS.tools : SYSTEM_PROMPTS.tags }];
  for (const m of recentThatFit(history)) messages.push({ role: m.role === "user" ? "user" : "assistant", content: m.text });
  messages.push({ role: "user", content: text });
  for (const { answer, results, calls, toolResults } of followUps) {
    if (calls.length === 0) {
      messages.push({ role: "assistant", content: answer }, { role: "user", content: results });
      continue;
    }
    messages.push({ role: "assistant", content: answer === "" ? null : answer, tool_calls: calls });
    calls.forEach((call, i) => messages.push({ role: "tool", content: toolResults[i], tool_call_id: call.id }));
  }
  return messages;
}

// ---- `<run>` tags, tool calls and rounds (src/exchange/run_tags.rs, tools.rs, rounds.rs, budget.rs)
function parseRunTags(answer) {
  let prose = "";
  const commands = [];
  let rest = answer;
  for (;;) {
    const start = rest.indexOf("<run>");
    if (start < 0) break;
    const end = rest.indexOf("</run>", start + 5);
    if (end < 0) break;
    prose += rest.slice(0, start);
    const cmd = rest.slice(start + 5, end).trim();
    if (cmd !== "") commands.push(cmd);
    rest = rest.slice(end + 6);
  }
  prose += rest;
  return { prose, commands: commands.slice(0, MAX_RUNS_PER_ANSWER), skipped: Math.max(0, commands.length - MAX_RUNS_PER_ANSWER) };
}

const JOB_TOOLS = ["start_job", "job_status", "stop_job"];
const FILE_TOOLS = ["read_file", "list_files", "write_file", "edit_file"];

/** The command a tool call asks for, `{cmd, timeoutMs?}`, or `{why}` it asks for none (its error turn). */
function commandOf(call) {
  const { name, arguments: text } = call.function;
  if (JOB_TOOLS.includes(name)) return { why: `${name}: this worker runs no jobs` };
  if (FILE_TOOLS.includes(name)) return { why: `${name}: this worker has no file tools` };
  if (name !== RUN_COMMAND) return { why: `there is no tool \`${name}\`; the tools are ${RUN_COMMAND}, start_job, job_status, stop_job, read_file, list_files, write_file and edit_file` };
  let args;
  try {
    args = JSON.parse(text);
  } catch {
    return { why: `the arguments of ${RUN_COMMAND} are not a JSON object` };
  }
  const cmd = args?.command;
  if (typeof cmd !== "string" || cmd.trim() === "") return { why: `${RUN_COMMAND} needs \`command\`, a non-empty string` };
  const timeoutMs = args.timeoutMs ?? undefined;
  if (timeoutMs !== undefined && !(Number.isInteger(timeoutMs) && timeoutMs >= 1 && timeoutMs <= EXEC_MAX_TIMEOUT_MS)) {
    return { why: `\`timeoutMs\` must be a whole number from 1 to ${EXEC_MAX_TIMEOUT_MS}` };
  }
  return { cmd: cmd.trim(), timeoutMs };
}

/** What an answer asks to run: its calls' commands when it made any, else its tags'; its prose without tags. */
function asked(text, calls) {
  const { prose, commands, skipped } = parseRunTags(text);
  if (calls.length === 0) return { prose, commands: commands.map((cmd) => ({ cmd })), skipped };
  const called = calls.map(commandOf).filter((c) => c.why === undefined);
  return { prose, commands: called.slice(0, MAX_RUNS_PER_ANSWER), skipped: Math.max(0, called.length - MAX_RUNS_PER_ANSWER) };
}

/** What the room sees of a command's output. */
function summary(stdout, stderr) {
  const out = withoutControls(stdout);
  const text = out !== "" ? out : withoutControls(stderr);
  return text === "" ? "[no output]" : firstChars(text, SUMMARY_CHARS);
}

/** A command as its block's header quotes it. */
function quoted(cmd) {
  const shown = firstChars(cmd, QUOTED_CMD_CHARS);
  return shown.length < cmd.length ? `${shown}…` : cmd;
}

/** One answer as the room sees it: its prose, then each command's output or error. */
function answerText({ prose, ran, skipped }) {
  let text = prose.trimEnd();
  for (const [full, outcome] of ran) {
    const cmd = quoted(full);
    text += outcome.ran ? `\n\nOutput (${cmd}):\n${summary(outcome.ran.stdout, outcome.ran.stderr).replace(/\n+$/, "")}` : `\n\nError (${cmd}):\n${withoutControls(outcome.failed)}`;
  }
  if (skipped > 0) text += `\n\n[${skipped} more command(s) not run: at most ${MAX_RUNS_PER_ANSWER} run per answer]`;
  return text.trim();
}

function stream(name, text) {
  if (text === "") return `\n${name}: (empty)`;
  const shown = firstChars(text, MODEL_OUTPUT_CHARS);
  const cut = shown.length < text.length ? `\n[cut: first ${MODEL_OUTPUT_CHARS} characters shown]` : "";
  return `\n${name}:\n${shown.replace(/\n+$/, "")}${cut}`;
}

/** One command's result as the model reads it. */
function result(cmd, outcome) {
  const o = outcome.ran;
  if (!o) return `$ ${cmd}\nnot run: ${outcome.failed}`;
  const status = o.timedOut ? `timed out (exit code ${o.exitCode})` : `exit code ${o.exitCode}`;
  return `$ ${cmd}\n${status}${stream("stdout", o.stdout)}${stream("stderr", o.stderr)}`;
}

/** What the model hears back after a round: a results turn (tags), or each call's tool turn (tools). */
function followUpOf(round) {
  const { answer, calls, ran, skipped } = round;
  if (calls.length === 0) {
    let results = RESULTS_HEADER;
    for (const [cmd, outcome] of ran) results += `\n\n${result(cmd, outcome)}`;
    if (skipped > 0) results += `\n\n${skipped} more command(s) of your answer were not run.`;
    return { answer, results, calls };
  }
  let next = 0;
  const toolResults = calls.map((call) => {
    const { why } = commandOf(call);
    if (why !== undefined) return `error: ${why}`;
    const done = ran[next++];
    return done ? result(...done) : `not run: at most ${MAX_RUNS_PER_ANSWER} commands per answer`;
  });
  return { answer, calls, toolResults };
}

const STOP_NOTES = {
  done: () => null,
  modelCalls: () => `[Stopped: at most ${MAX_MODEL_CALLS} model answers per message; send another message to continue]`,
  commands: (notRun) => `[Stopped: at most ${MAX_COMMANDS_PER_MESSAGE} commands per message; ${notRun} more not run]`,
  budget: () => "[Stopped: not enough of this message's time was left for the model to go on]",
  modelFailed: (why) => `[The model could not continue: ${why}]`,
  cut: (why) => `[The model's answer was cut off (${why}); what came is shown, and its commands were not run]`,
};

/** A follow-up model call's limit, leaving room for a command; null when there is none. */
function followUpCall(leftMs, modelLimitMs) {
  const forModel = leftMs - (MIN_COMMAND_MS + SANDBOXD_MARGIN_MS);
  return forModel >= MIN_MODEL_CALL_MS ? Math.min(forModel, modelLimitMs) : null;
}

/**
 * What a command of the model's came to, within the time it asked for if
 * any: `{ran: result}` or `{failed: why}`. `userId` sent the message.
 */
async function runCommand(sandbox, room, userId, cmd, askedMs, deadline) {
  const why = commandProblem(cmd);
  if (why) return { failed: `command ${why}` };
  const left = Math.max(0, deadline - Date.now());
  const budgetMs = Math.min(Math.max(0, left - SANDBOXD_MARGIN_MS), EXEC_DEFAULT_TIMEOUT_MS);
  if (budgetMs <= 0) return { failed: "not run: the exchange's time budget is spent" };
  const timeoutMs = askedMs === undefined ? budgetMs : Math.min(askedMs, budgetMs);
  // Who asked, and who let it run (nobody: every command runs, as under `auto`).
  const request = { cmd, timeoutMs, userId: userId ?? null, decidedBy: null, rule: null };
  const outcome = await within(left, execThrough(sandbox, room, request));
  return outcome === TIMED_OUT ? { failed: `the sandbox did not answer within ${left} ms` } : outcome;
}

async function execThrough(sandbox, room, request) {
  let res;
  try {
    // The agent's own path: the Sandbox object logs and audits its commands as the agent's.
    res = await sandbox.fetch(`https://duet.internal${internalPath(room, "exec")}`, { method: "POST", body: JSON.stringify(request) });
  } catch (e) {
    return { failed: internal(e?.message ?? String(e)).message };
  }
  if (res.status !== 200) return { failed: await errorOf(res) };
  let result;
  try {
    result = (await res.json()).result;
  } catch (e) {
    return { failed: `unexpected sandbox answer: ${e.message}` };
  }
  const str = (v) => (typeof v === "string" ? v : "");
  return { ran: { stdout: str(result?.stdout), stderr: str(result?.stderr), exitCode: Number.isInteger(result?.exitCode) ? result.exitCode : 0, timedOut: result?.timedOut === true } };
}

/** One `/message` exchange (src/exchange/run.rs): answers and their commands, until done or a limit; the room's reply. */
async function exchange(env, room, history, user, stillCurrent) {
  const { text, ts: started } = user;
  const model = configuredModel(env);
  const deadline = started + MESSAGE_BUDGET_MS;
  const modelLimit = aiTimeLimit(env);
  const sandbox = env.Sandbox.getByName(sandboxName(room));
  const rounds = [];
  const followUps = [];
  let commandsRun = 0;
  let stop;
  for (;;) {
    const context = buildContext(history, text, followUps, model.tools);
    const limit = rounds.length === 0 ? MESSAGE_BUDGET_MS : followUpCall(Math.max(0, deadline - Date.now()), modelLimit);
    if (limit === null) {
      stop = STOP_NOTES.budget();
      break;
    }
    let answer;
    try {
      answer = await askModel(env, model, room, context, limit);
    } catch (e) {
      if (rounds.length === 0) throw e;
      stop = STOP_NOTES.modelFailed(asApiError(e).message);
      break;
    }
    const { prose, commands, skipped } = asked(answer.text, answer.calls);
    const round = { answer: answer.text, calls: answer.calls, prose, ran: [], skipped };
    rounds.push(round);
    if (answer.cut !== undefined) {
      stop = STOP_NOTES.cut(answer.cut);
      break;
    }
    const allowed = Math.min(commands.length, Math.max(0, MAX_COMMANDS_PER_MESSAGE - commandsRun));
    for (const { cmd, timeoutMs } of commands.slice(0, allowed)) {
      stillCurrent();
      round.ran.push([cmd, await runCommand(sandbox, room, user.userId, cmd, timeoutMs, deadline)]);
    }
    commandsRun += allowed;
    const notRun = commands.length - allowed;
    if (round.ran.length === 0 && round.calls.length === 0 && notRun === 0) {
      stop = STOP_NOTES.done();
      break;
    }
    if (notRun > 0) {
      stop = STOP_NOTES.commands(notRun);
      break;
    }
    if (rounds.length === MAX_MODEL_CALLS) {
      stop = STOP_NOTES.modelCalls();
      break;
    }
    followUps.push(followUpOf(round));
  }
  return boundedReply(rounds.map(answerText).filter((t) => t !== "").join("\n\n"), stop);
}

/** The reply in at most MAX_TEXT_CHARS characters, keeping the stop note (src/exchange/rounds.rs). */
function boundedReply(body, note) {
  const paragraphs = (first, then) => (then ? (first ? `${first}\n\n${then}` : then) : first);
  const whole = paragraphs(body, note);
  if ([...whole].length <= MAX_TEXT_CHARS) return whole;
  const tail = paragraphs(`[Cut: the reply was over ${MAX_TEXT_CHARS} characters]`, note);
  const room = Math.max(0, MAX_TEXT_CHARS - ([...tail].length + 2));
  return firstChars(paragraphs(firstChars(body, room).trimEnd(), tail), MAX_TEXT_CHARS);
}

// ---- DuetAgent (src/agent)
/** The log's event for a stored message (src/feed/event.rs). */
const messageEvent = (message) => JSON.stringify({ type: "message", message });
const toMessage = (row) =>
  row.userId == null ? { role: row.role, text: row.text, ts: row.ts } : { role: row.role, userId: row.userId, text: row.text, ts: row.ts };

/** How often a busy room's last use is written: every tenth of `ms`, at least once a minute. */
const touchStep = (ms) => Math.min(Math.floor(ms / 10), 60_000);

export class DuetAgent extends DurableObject {
  constructor(ctx, env) {
    super(ctx, env);
    this.sql = ctx.storage.sql;
    this.sql.exec(`CREATE TABLE IF NOT EXISTS messages (
      id INTEGER PRIMARY KEY AUTOINCREMENT,
      role TEXT NOT NULL,
      user_id TEXT,
      text TEXT NOT NULL,
      ts INTEGER NOT NULL
    )`);
    this.sql.exec(`CREATE TABLE IF NOT EXISTS room (
      id INTEGER PRIMARY KEY CHECK (id = 1),
      name TEXT NOT NULL,
      last_used INTEGER NOT NULL
    )`);
    this.sql.exec(`CREATE TABLE IF NOT EXISTS feed (
      id INTEGER PRIMARY KEY CHECK (id = 1),
      watching INTEGER NOT NULL
    )`);
    this.epoch = 0; // cleanups so far: an exchange from an earlier one stores nothing
    this.touched = null; // when this instance last wrote the room's last use
    this.alarmSet = false; // this instance has set the expiry alarm
    this.kept = null; // the last HISTORY_LIMIT messages, once read (this object is the only writer)
    this.watched = null; // whether the room's live feed has watchers, once read
  }

  async fetch(req) {
    const path = new URL(req.url).pathname;
    return objectResponse("DuetAgent", path, async () => {
      const { room, action } = objectRoute(req.method, path);
      if (action === "message" || action === "history") await this.touch(room);
      if (action === "message") return this.send(room, messageRequest(await readBody(req)));
      if (action === "history") return json(200, { messages: this.recent() });
      if (action === "cleanup") return this.cleanup(room);
      throw notFound();
    });
  }

  /** The room expires ROOM_TTL_SECONDS after its last use. */
  async alarm() {
    const row = this.sql.exec("SELECT name, last_used FROM room WHERE id = 1").toArray()[0];
    if (!row) return;
    const expires = row.last_used + secondsAsMs(this.env, "ROOM_TTL_SECONDS", ROOM_TTL_SECONDS);
    const now = Date.now();
    if (now < expires) {
      await this.ctx.storage.setAlarm(expires);
      this.alarmSet = true;
      return;
    }
    // The room's log goes too, told first: a failure fails the alarm, which the runtime retries.
    const res = await this.env.Sandbox.getByName(sandboxName(row.name)).fetch(`https://duet.internal${internalPath(row.name, "expired")}`, { method: "POST" });
    if (res.status !== 200) throw new Error(await errorOf(res));
    this.alarmSet = false;
    this.epoch++;
    this.clear();
    log({ event: "expire", object: "DuetAgent", room: row.name, durationMs: Date.now() - now });
  }

  /** Records a use of the room: its row at most once per step, the alarm once per instance. */
  async touch(room) {
    const now = Date.now();
    const ttl = secondsAsMs(this.env, "ROOM_TTL_SECONDS", ROOM_TTL_SECONDS);
    if (this.touched === null || now - this.touched >= touchStep(ttl)) {
      this.sql.exec(
        `INSERT INTO room (id, name, last_used) VALUES (1, ?, ?)
         ON CONFLICT (id) DO UPDATE SET name = excluded.name, last_used = excluded.last_used`,
        room,
        now,
      );
      this.touched = now;
    }
    if (!this.alarmSet) {
      this.alarmSet = true;
      await this.ctx.storage.setAlarm(now + ttl);
    }
  }

  /** Whether the room's live feed has watchers (this reference never has any). */
  watching() {
    if (this.watched === null) {
      const row = this.sql.exec("SELECT watching FROM feed WHERE id = 1").toArray()[0];
      this.watched = row !== undefined && row.watching !== 0;
    }
    return this.watched;
  }

  /** The last HISTORY_LIMIT messages, oldest first. */
  recent() {
    if (this.kept === null) {
      this.kept = this.sql
        .exec(
          `SELECT role, user_id AS userId, text, ts FROM
             (SELECT * FROM messages ORDER BY id DESC LIMIT ?)
           ORDER BY id`,
          HISTORY_LIMIT,
        )
        .toArray()
        .map(toMessage);
    }
    return this.kept.slice();
  }

  /** Stores the messages in one statement, then forgets all but the last HISTORY_LIMIT. */
  append(messages) {
    const values = messages.flatMap((m) => [m.role, m.userId ?? null, m.text, m.ts]);
    this.sql.exec(`INSERT INTO messages (role, user_id, text, ts) VALUES ${messages.map(() => "(?, ?, ?, ?)").join(", ")}`, ...values);
    this.sql.exec("DELETE FROM messages WHERE id <= (SELECT id FROM messages ORDER BY id DESC LIMIT 1 OFFSET ?)", HISTORY_LIMIT);
    if (this.kept !== null) this.kept = this.kept.concat(messages).slice(-HISTORY_LIMIT);
  }

  clear() {
    this.sql.exec("DELETE FROM messages");
    this.sql.exec("DELETE FROM room");
    this.kept = [];
    this.touched = null;
  }

  stillCurrent(epoch) {
    if (this.epoch !== epoch) throw cleanedUp();
  }

  /**
   * A message's exchange, stored, and given to the room's log: with nobody
   * watching (always, here), the user's message goes with the reply (or the
   * failure), after the exchange's commands, in one call to the Sandbox
   * object. The Rust worker, with watchers, sends the message at once.
   */
  async send(room, request) {
    const started = Date.now();
    const user = request.userId === undefined ? { role: "user", text: request.text, ts: started } : { role: "user", userId: request.userId, text: request.text, ts: started };
    const watched = this.watching();
    const unseen = watched ? [] : [messageEvent(user)];
    let agent;
    try {
      const epoch = this.epoch;
      const history = this.recent();
      const reply = await exchange(this.env, room, history, user, () => this.stillCurrent(epoch));
      // Some models refuse an empty assistant turn in the history.
      if (reply === "") throw aiFailed("the model's answer had no text (only empty <run> tags)");
      this.stillCurrent(epoch);
      agent = { role: "agent", text: reply, ts: Date.now() };
      this.append([user, agent]);
    } catch (e) {
      const failure = asApiError(e);
      await this.publish(room, [...unseen, JSON.stringify({ type: "failed", error: failure.message })]);
      throw failure;
    }
    await this.publish(room, [...unseen, messageEvent(agent)]);
    return json(200, { reply: agent.text, messages: this.recent() });
  }

  /** Sends events (JSON), in order, to the room's log; one that cannot be reached costs nothing but the events. */
  async publish(room, events) {
    try {
      const res = await this.env.Sandbox.getByName(sandboxName(room)).fetch(`https://duet.internal${internalPath(room, "publish")}`, { method: "POST", body: events.join("\n") });
      if (res.status !== 200) await errorOf(res);
    } catch {
      // lost, as the Rust worker loses it
    }
  }

  async cleanup(room) {
    this.epoch++;
    this.clear();
    this.alarmSet = false;
    await this.ctx.storage.deleteAlarm();
    const errors = [];
    try {
      const res = await this.env.Sandbox.getByName(sandboxName(room)).fetch(`https://duet.internal${internalPath(room, "destroy")}`, { method: "POST" });
      if (res.status !== 200) errors.push(`sandbox: ${await errorOf(res)}`);
    } catch (e) {
      errors.push(`sandbox: ${internal(e?.message ?? String(e)).message}`);
    }
    return errors.length === 0 ? json(200, { cleaned: true, roomId: room }) : json(207, { cleaned: true, errors });
  }
}

// ---- Sandbox (src/sandbox)
/** sandboxd at `base`: one call, bounded by `limitMs` until its answer's headers. */
async function callSandboxd(base, method, path, body, limitMs) {
  const controller = new AbortController();
  let res;
  try {
    res = await within(limitMs, fetch(base + path, { method, body, signal: controller.signal }));
  } catch (e) {
    throw sandboxFailed(`cannot reach sandboxd: ${e?.message ?? e}`);
  }
  if (res === TIMED_OUT) {
    controller.abort();
    throw sandboxTimeout(limitMs);
  }
  if (res.status === 200) return res;
  const why = `sandboxd answered ${res.status}: ${await errorOf(res)}`;
  throw res.status === 503 ? sandboxUnavailable(why) : sandboxFailed(why);
}

// ---- the room's log (src/feed/log.rs, src/feed/fanout.rs, src/feed/event.rs)
const FEED_LOG_EVENTS = 2_000;
const FEED_LOG_BYTES = 1024 * 1024;
const OUTPUT_EVENT_BYTES = 16 * 1024;

/** The bytes of `s` in UTF-8. */
function utf8Length(s) {
  let n = s.length;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x80) continue;
    if (c < 0x800) n += 1; // two bytes
    else if (c >= 0xd800 && c <= 0xdbff) {
      n += 2; // a surrogate pair: four bytes
      i++;
    } else n += 2; // three bytes
  }
  return n;
}

/** `text` in pieces of at most OUTPUT_EVENT_BYTES bytes of UTF-8, cut between characters. */
function pieces(text) {
  const out = [];
  let start = 0;
  let bytes = 0;
  for (let i = 0; i < text.length; ) {
    const c = text.charCodeAt(i);
    const pair = c >= 0xd800 && c <= 0xdbff && i + 1 < text.length;
    const size = c < 0x80 ? 1 : c < 0x800 ? 2 : pair ? 4 : 3;
    if (bytes + size > OUTPUT_EVENT_BYTES) {
      out.push(text.slice(start, i));
      start = i;
      bytes = 0;
    }
    bytes += size;
    i += pair ? 2 : 1;
  }
  if (start < text.length) out.push(text.slice(start));
  return out;
}

/** A fresh id, `prefix` telling what it names (src/runtime/random.rs). */
const freshId = (prefix) => prefix + Math.floor(Math.random() * 2 ** 62).toString(16).padStart(16, "0");

/**
 * The room's log: every event (a JSON object, `type` first), numbered by
 * SQLite's AUTOINCREMENT, the oldest forgotten beyond FEED_LOG_EVENTS
 * events (FEED_LOG_EVENTS lowers it) or FEED_LOG_BYTES bytes. What it holds
 * is counted once per object, then kept up to date.
 */
class FeedLog {
  constructor(sql, maxEvents) {
    this.sql = sql;
    this.maxEvents = maxEvents;
    this.sql.exec(`CREATE TABLE IF NOT EXISTS feed_log (
      seq INTEGER PRIMARY KEY AUTOINCREMENT,
      kind TEXT NOT NULL,
      event TEXT NOT NULL
    )`);
    this.tally = null; // {events, bytes}, once counted
    this.last = null; // the newest event's number, once known
  }

  /** Appends an event of `kind`; answers its frame, the event with its number. */
  append(kind, event) {
    if (this.tally === null) {
      const [events, bytes] = this.sql.exec("SELECT COUNT(*), COALESCE(SUM(length(CAST(event AS BLOB))), 0) FROM feed_log").raw().next().value;
      this.tally = { events, bytes };
    }
    const seq = this.sql.exec("INSERT INTO feed_log (kind, event) VALUES (?, ?) RETURNING seq", kind, event).raw().next().value[0];
    this.last = seq;
    this.tally.events += 1;
    this.tally.bytes += utf8Length(event);
    if (this.tally.events > this.maxEvents || this.tally.bytes > FEED_LOG_BYTES) this.trim();
    return `{"seq":${seq},${event.slice(1)}`;
  }

  /** Forgets the oldest events until the log is within its bounds. */
  trim() {
    const tally = this.tally;
    let through;
    for (const [seq, bytes] of this.sql.exec("SELECT seq, length(CAST(event AS BLOB)) FROM feed_log ORDER BY seq").raw()) {
      if (tally.events <= this.maxEvents && tally.bytes <= FEED_LOG_BYTES) break;
      through = seq;
      tally.events -= 1;
      tally.bytes = Math.max(0, tally.bytes - bytes);
    }
    if (through !== undefined) this.sql.exec("DELETE FROM feed_log WHERE seq <= ?", through);
  }

  /** The room is gone: so is its log (its numbers go on). */
  forget() {
    this.sql.exec("DELETE FROM feed_log");
    this.tally = { events: 0, bytes: 0 };
  }
}

export class Sandbox extends DurableObject {
  constructor(ctx, env) {
    super(ctx, env);
    this.sql = ctx.storage.sql;
    this.sql.exec(`CREATE TABLE IF NOT EXISTS room (
      id INTEGER PRIMARY KEY CHECK (id = 1),
      name TEXT NOT NULL,
      last_used INTEGER NOT NULL,
      asleep INTEGER NOT NULL
    )`);
    this.sql.exec("CREATE TABLE IF NOT EXISTS archive (seq INTEGER PRIMARY KEY, bytes BLOB NOT NULL)");
    // Every command, as the Rust object's audit keeps it (the newest 200).
    this.sql.exec("CREATE TABLE IF NOT EXISTS audit (id INTEGER PRIMARY KEY AUTOINCREMENT, entry TEXT NOT NULL)");
    this.log = new FeedLog(this.sql, number(env, "FEED_LOG_EVENTS", FEED_LOG_EVENTS, FEED_LOG_EVENTS));
    this.epoch = 0; // cleanups so far
    this.alarmSet = false; // this instance has set the lifecycle alarm
    // The room's state ({name, lastUsed, asleep} or null) and the last use
    // stored, once read: this object is the only writer of its row.
    this.kept = null;
  }

  async fetch(req) {
    const path = new URL(req.url).pathname;
    return objectResponse("Sandbox", path, async () => {
      const arrived = Date.now();
      const epoch = this.epoch;
      const { room, action, call } = objectRoute(req.method, path);
      const name = sandboxName(room);
      if (action === "exec" || call === "exec") {
        const source = call === "exec" ? "agent" : "exec";
        const request = execRequest(await readBody(req));
        await this.touch(room, arrived);
        const askedBy = request.userId ?? null;
        // The Rust object streams a command's output to the room's
        // watchers (its WebSockets) as it comes; with none, the log is
        // given it whole at the end, as here.
        const watched = this.ctx.getWebSockets().length > 0;
        if (watched) throw internal("the reference has no live feed, yet a WebSocket is open");
        const id = freshId("c");
        this.publish("command", JSON.stringify({ type: "command", id, cmd: request.cmd, source, askedBy: askedBy ?? undefined }));
        let result, failure;
        try {
          result = await this.exec(name, request, arrived, epoch);
        } catch (e) {
          failure = asApiError(e);
        }
        // Read once, for the log and the audit.
        let ended = null;
        try {
          ended = result === undefined ? null : JSON.parse(result);
        } catch {}
        this.commandEnded(id, ended, failure);
        this.audit(request, source, askedBy, arrived, result !== undefined, ended);
        if (failure) throw failure;
        // sandboxd's answer goes through as it came.
        return new Response(`{"result":${result},"sandboxName":${JSON.stringify(name)}}`, { headers: { "content-type": "application/json" } });
      }
      if (call === "publish") {
        // One event a line: JSON text has no raw newline.
        const events = utf8.decode(await readBody(req));
        for (const event of events.split("\n")) this.publish(/^\{"type":"([^"]*)"/.exec(event)?.[1] ?? "", event);
        return new Response(null);
      }
      if (call === "expired") {
        this.log.forget();
        return new Response(null);
      }
      if (call === "destroy") {
        this.log.forget();
        this.epoch++;
        await callSandboxd(this.sandboxd(), "DELETE", `/v1/sandboxes/${name}`, undefined, SANDBOX_DESTROY_MS);
        this.forget();
        this.alarmSet = false;
        await this.ctx.storage.deleteAlarm();
        return json(200, { destroyed: true });
      }
      throw notFound();
    });
  }

  /** Logs an event and sends its frame to every watcher (there are none here). */
  publish(kind, event) {
    const frame = this.log.append(kind, event);
    for (const ws of this.ctx.getWebSockets()) ws.send(frame);
  }

  /**
   * Logs how a command ended: its output first (nobody watched it as it
   * came), or why it could not run as its stderr, then its end.
   */
  commandEnded(id, ended, failure) {
    const text = (v) => (typeof v === "string" ? v : "");
    const flag = (v) => (typeof v === "boolean" ? v : false);
    if (ended) {
      for (const [stream, output] of [["stdout", text(ended.stdout)], ["stderr", text(ended.stderr)]]) {
        for (const data of pieces(output)) this.publish("output", JSON.stringify({ type: "output", id, stream, data }));
      }
    } else if (failure) {
      this.publish("output", JSON.stringify({ type: "output", id, stream: "stderr", data: `${failure.message}\n` }));
    }
    const exitCode = failure ? -1 : Number.isSafeInteger(ended?.exitCode) ? ended.exitCode | 0 : 0;
    const end = { type: "command_end", id, exitCode, truncated: !failure && flag(ended?.truncated), timedOut: !failure && flag(ended?.timedOut) };
    this.publish("command_end", JSON.stringify(end));
  }

  /** Records a command as the Rust object's audit does (the same row, the same bound). */
  audit(request, source, askedBy, arrived, ran, ended) {
    const entry = {
      at: arrived,
      command: firstChars(request.cmd, AUDIT_CMD_CHARS),
      source,
      askedBy,
      outcome: ran ? "ran" : "failed",
      decidedBy: source === "agent" ? request.decidedBy : null,
      rule: source === "agent" ? request.rule : null,
      exitCode: ended ? (Number.isSafeInteger(ended.exitCode) ? ended.exitCode | 0 : 0) : null,
      durationMs: Date.now() - arrived,
      timedOut: ended?.timedOut === true,
    };
    this.sql.exec("INSERT INTO audit (entry) VALUES (?)", JSON.stringify(entry));
    this.sql.exec("DELETE FROM audit WHERE id <= last_insert_rowid() - ?", AUDIT_ENTRIES);
  }

  async alarm() {
    const room = this.state();
    if (!room) return;
    const { ttlMs } = this.timing();
    if (Date.now() < room.lastUsed + ttlMs) {
      // No sleep here (see the top of this file): the next alarm is the expiry.
      await this.ctx.storage.setAlarm(room.lastUsed + ttlMs);
      this.alarmSet = true;
      return;
    }
    const started = Date.now();
    this.log.forget();
    this.alarmSet = false;
    this.epoch++;
    if (!room.asleep) await callSandboxd(this.sandboxd(), "DELETE", `/v1/sandboxes/${sandboxName(room.name)}`, undefined, SANDBOX_DESTROY_MS);
    this.forget();
    log({ event: "expire", object: "Sandbox", room: room.name, durationMs: Date.now() - started });
  }

  sandboxd() {
    const url = setting(this.env, "SANDBOX_URL");
    if (url === undefined) {
      throw sandboxUnavailable(
        "no container here (containers need Docker or Cloudflare) and SANDBOX_URL is not set; start sandboxd and set SANDBOX_URL to its address",
      );
    }
    return url.replace(/\/+$/, "");
  }

  timing() {
    return {
      idleMs: secondsAsMs(this.env, "SANDBOX_IDLE_SECONDS", SANDBOX_IDLE_SECONDS),
      ttlMs: secondsAsMs(this.env, "ROOM_TTL_SECONDS", ROOM_TTL_SECONDS),
    };
  }

  /** The room's state, or null before its first command. */
  state() {
    if (this.kept === null) {
      const row = this.sql.exec("SELECT name, last_used, asleep FROM room WHERE id = 1").toArray()[0];
      const state = row ? { name: row.name, lastUsed: row.last_used, asleep: row.asleep !== 0 } : null;
      this.kept = { state, storedLastUsed: state?.lastUsed ?? 0 };
    }
    return this.kept.state;
  }

  /** The room is gone: its files, its row and its audit. */
  forget() {
    this.sql.exec("DELETE FROM archive");
    this.sql.exec("DELETE FROM room");
    this.sql.exec("DELETE FROM audit");
    this.kept = { state: null, storedLastUsed: 0 };
  }

  /**
   * Records a command of `room` at `now`: its row when the room is new or a
   * step (a tenth of the idle time, at most a minute) passed since the last
   * one stored; the alarm once per instance, at the first of idle time and
   * expiry.
   */
  async touch(room, now) {
    const { idleMs, ttlMs } = this.timing();
    const state = this.state();
    const stored = this.kept.storedLastUsed;
    const store = state?.name !== room || now - stored >= touchStep(idleMs);
    if (store) {
      this.sql.exec(
        `INSERT INTO room (id, name, last_used, asleep) VALUES (1, ?, ?, 0)
         ON CONFLICT (id) DO UPDATE SET name = excluded.name, last_used = excluded.last_used`,
        room,
        now,
      );
    }
    this.kept = { state: { name: room, lastUsed: now, asleep: state?.asleep ?? false }, storedLastUsed: store ? now : stored };
    if (!this.alarmSet) {
      this.alarmSet = true;
      const asleep = this.state().asleep;
      await this.ctx.storage.setAlarm(asleep ? now + ttlMs : now + Math.min(idleMs, ttlMs));
    }
  }

  /** Runs a command in sandboxd; answers its JSON result as text. */
  async exec(name, request, arrived, epoch) {
    const base = this.sandboxd();
    // With SANDBOX_URL and no sleep, a sandbox is never cold; the checks
    // are the Rust object's.
    const cold = this.state()?.asleep ?? false;
    const deadline = arrived + Math.min(request.timeoutMs + SANDBOXD_MARGIN_MS + (cold ? COLD_START_ALLOWANCE_MS : 0), EXEC_ANSWER_MS);
    const late = () => sandboxTimeout(deadline - arrived);
    if (this.state()?.asleep) {
      this.sql.exec("UPDATE room SET asleep = 0 WHERE id = 1");
      this.kept.state.asleep = false;
    }
    let timeoutMs = request.timeoutMs;
    if (cold) {
      timeoutMs = Math.min(timeoutMs, deadline - Date.now() - SANDBOXD_MARGIN_MS);
      if (timeoutMs <= 0) throw late();
    }
    if (this.epoch !== epoch) throw cleanedUp();
    const body = JSON.stringify({ cmd: request.cmd, timeoutMs });
    let res;
    try {
      res = await callSandboxd(base, "POST", `/v1/sandboxes/${name}/exec`, body, timeoutMs + SANDBOXD_MARGIN_MS);
    } catch (e) {
      throw e instanceof ApiError && e.status === 504 ? late() : e;
    }
    const unexpected = (why) => sandboxFailed(`unexpected answer from sandboxd: ${why}`);
    let text;
    try {
      text = await res.text();
      JSON.parse(text);
    } catch (e) {
      throw unexpected(e?.message ?? String(e));
    }
    if (!text.startsWith("{")) throw unexpected("not a JSON object");
    return text;
  }
}

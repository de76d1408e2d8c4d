// Keeps docs/openapi.yaml true to the code: its limits must equal the
// constants of src/api/limits.rs, its routes the endpoints the worker names
// (src/api/error.rs), and every non-500 status the worker can give must be
// documented. Run with `node --test tests/contract/`; no dependencies.
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const read = (file) => fs.readFileSync(path.join(ROOT, file), "utf8");

/** `pub const NAME: type = expr;` of limits.rs, with `64 * 1024` and `8_000` evaluated. */
export function rustConstants(source) {
  const constants = {};
  for (const [, name, expr] of source.matchAll(/pub const (\w+): \w+ = ([^;]+);/g)) {
    const factors = expr.split("*").map((f) => f.trim().replaceAll("_", ""));
    assert.ok(factors.every((f) => /^\d+$/.test(f)), `cannot evaluate ${name} = ${expr}`);
    constants[name] = factors.reduce((product, f) => product * Number(f), 1);
  }
  return constants;
}

// A parser for the YAML subset docs/openapi.yaml is written in: block mappings
// and sequences, flow sequences of scalars, `{}`, `[]`, quoted and plain
// scalars, `|` block scalars and comments. Anything else throws, so the
// document cannot silently drift out of what this test understands.
export function parseYaml(text) {
  const lines = [];
  for (const raw of text.split("\n")) {
    const stripped = stripComment(raw).replace(/\s+$/, "");
    lines.push({ indent: raw.length - raw.trimStart().length, text: stripped.trim(), raw });
  }
  let i = 0;
  const skipBlank = () => {
    while (i < lines.length && lines[i].text === "") i++;
  };

  function parseBlock(indent) {
    skipBlank();
    if (i >= lines.length) return null;
    return lines[i].text.startsWith("- ") || lines[i].text === "-" ? parseSeq(lines[i].indent) : parseMap(lines[i].indent);
  }

  function parseMap(indent) {
    const map = {};
    for (skipBlank(); i < lines.length && lines[i].indent === indent; skipBlank()) {
      const line = lines[i];
      if (line.text.startsWith("- ")) break;
      const m = /^("[^"]*"|'[^']*'|[^:'"]+):(?:\s+(.*))?$/.exec(line.text);
      if (!m) throw new Error(`unsupported YAML at line ${i + 1}: ${line.raw}`);
      const key = scalar(m[1]);
      i++;
      map[key] = valueAfterKey(m[2], indent);
    }
    skipBlank();
    if (i < lines.length && lines[i].indent > indent) throw new Error(`bad indentation at line ${i + 1}`);
    return map;
  }

  function parseSeq(indent) {
    const seq = [];
    for (skipBlank(); i < lines.length && lines[i].indent === indent && lines[i].text.startsWith("- "); skipBlank()) {
      const rest = lines[i].text.slice(2);
      if (/^("[^"]*"|'[^']*'|[^:'"{[]+):(\s|$)/.test(rest)) {
        // "- key: value" opens a mapping whose keys sit at indent + 2.
        lines[i] = { ...lines[i], indent: indent + 2, text: rest };
        seq.push(parseMap(indent + 2));
      } else {
        i++;
        seq.push(flow(rest));
      }
    }
    return seq;
  }

  function valueAfterKey(rest, indent) {
    if (rest === undefined || rest === "") {
      skipBlank();
      if (i < lines.length && lines[i].indent > indent) return parseBlock(lines[i].indent);
      if (i < lines.length && lines[i].indent === indent && lines[i].text.startsWith("- ")) return parseSeq(indent);
      return null;
    }
    if (rest === "|" || rest === ">") {
      const body = [];
      while (i < lines.length && (lines[i].raw.trim() === "" || lines[i].indent > indent)) body.push(lines[i++].raw);
      while (body.length && body[body.length - 1].trim() === "") body.pop();
      const cut = Math.min(...body.filter((l) => l.trim()).map((l) => l.length - l.trimStart().length));
      return body.map((l) => l.slice(cut)).join("\n") + "\n";
    }
    return flow(rest);
  }

  return parseBlock(0);
}

function stripComment(line) {
  let quote = null;
  for (let k = 0; k < line.length; k++) {
    const c = line[k];
    if (quote) {
      if (c === quote) quote = null;
    } else if (c === '"' || c === "'") {
      quote = c;
    } else if (c === "#" && (k === 0 || /\s/.test(line[k - 1]))) {
      return line.slice(0, k);
    }
  }
  return line;
}

function flow(text) {
  if (text === "{}") return {};
  if (text.startsWith("[")) {
    assert.ok(text.endsWith("]"), `unsupported flow sequence: ${text}`);
    const inner = text.slice(1, -1).trim();
    return inner === "" ? [] : splitFlow(inner).map((item) => scalar(item.trim()));
  }
  if (text.startsWith("{")) throw new Error(`unsupported flow mapping: ${text}`);
  return scalar(text);
}

function splitFlow(inner) {
  const items = [];
  let quote = null;
  let start = 0;
  for (let k = 0; k < inner.length; k++) {
    const c = inner[k];
    if (quote) {
      if (c === quote) quote = null;
    } else if (c === '"' || c === "'") {
      quote = c;
    } else if (c === ",") {
      items.push(inner.slice(start, k));
      start = k + 1;
    }
  }
  items.push(inner.slice(start));
  return items;
}

function scalar(text) {
  if (text.startsWith('"')) return JSON.parse(text);
  if (text.startsWith("'")) return text.slice(1, -1).replaceAll("''", "'");
  if (text === "true") return true;
  if (text === "false") return false;
  if (text === "null" || text === "~") return null;
  if (/^-?\d+$/.test(text)) return Number(text);
  return text;
}

const limits = rustConstants(read("src/api/limits.rs"));
const doc = parseYaml(read("docs/openapi.yaml"));
const schemas = doc.components.schemas;
const METHODS = ["get", "put", "post", "delete", "patch", "head", "options", "trace"];

function* walk(node, where = "#") {
  if (node === null || typeof node !== "object") return;
  yield [where, node];
  for (const [key, value] of Object.entries(node)) yield* walk(value, `${where}/${key}`);
}

test("limits.rs is parsed", () => {
  for (const name of ["MAX_BODY_BYTES", "MAX_ROOM_ID_CHARS", "MAX_TEXT_CHARS", "MAX_USER_ID_CHARS", "MAX_CMD_CHARS",
    "HISTORY_LIMIT", "EXEC_DEFAULT_TIMEOUT_MS", "EXEC_MAX_TIMEOUT_MS"]) {
    assert.ok(Number.isSafeInteger(limits[name]), name);
  }
  assert.equal(limits.MAX_BODY_BYTES, 65536);
});

test("the OpenAPI document is OpenAPI 3 and parses", () => {
  assert.match(doc.openapi, /^3\.[01]\.\d+$/);
  assert.equal(typeof doc.paths, "object");
});

test("x-limits equal limits.rs", () => {
  assert.deepEqual(doc.info["x-limits"], {
    maxBodyBytes: limits.MAX_BODY_BYTES,
    roomIdMaxChars: limits.MAX_ROOM_ID_CHARS,
    textMaxChars: limits.MAX_TEXT_CHARS,
    userIdMaxChars: limits.MAX_USER_ID_CHARS,
    cmdMaxChars: limits.MAX_CMD_CHARS,
    timeoutMsMax: limits.EXEC_MAX_TIMEOUT_MS,
    timeoutMsDefault: limits.EXEC_DEFAULT_TIMEOUT_MS,
    historyLimit: limits.HISTORY_LIMIT,
  });
});

test("roomId: length and pattern", () => {
  const room = doc.components.parameters.RoomId;
  assert.equal(room.in, "path");
  assert.equal(room.schema.minLength, 1);
  assert.equal(room.schema.maxLength, limits.MAX_ROOM_ID_CHARS);
  assert.equal(room.schema.pattern, `^[A-Za-z0-9._-]{1,${limits.MAX_ROOM_ID_CHARS}}$`);
  assert.match(schemas.ExecResponse.properties.sandboxName.pattern, new RegExp(`\\{1,${limits.MAX_ROOM_ID_CHARS}\\}`));
  // Every path with {roomId} declares it through the shared parameter.
  for (const [route, item] of Object.entries(doc.paths)) {
    if (!route.includes("{roomId}")) continue;
    assert.deepEqual(item.parameters, [{ $ref: "#/components/parameters/RoomId" }], route);
  }
});

test("request bodies: field limits", () => {
  const { text, userId } = schemas.MessageRequest.properties;
  assert.deepEqual(schemas.MessageRequest.required, ["text"]);
  assert.equal(text.minLength, 1);
  assert.equal(text.maxLength, limits.MAX_TEXT_CHARS);
  assert.equal(userId.minLength, 1);
  assert.equal(userId.maxLength, limits.MAX_USER_ID_CHARS);
  const { cmd, timeoutMs } = schemas.ExecRequest.properties;
  assert.deepEqual(schemas.ExecRequest.required, ["cmd"]);
  assert.equal(cmd.minLength, 1);
  assert.equal(cmd.maxLength, limits.MAX_CMD_CHARS);
  assert.equal(timeoutMs.type, "integer");
  assert.equal(timeoutMs.minimum, 1);
  assert.equal(timeoutMs.maximum, limits.EXEC_MAX_TIMEOUT_MS);
  assert.equal(timeoutMs.default, limits.EXEC_DEFAULT_TIMEOUT_MS);
  // "Not blank after trimming" (Rust's str::trim removes Unicode White_Space).
  const notBlank = "[^\\t\\n\\v\\f\\r \\u0085\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000]";
  assert.equal(text.pattern, notBlank);
  assert.equal(userId.pattern, notBlank);
  // cmd: not blank either, and without NUL.
  assert.equal(cmd.pattern, `^[^\\u0000]*${notBlank.replace("[^", "[^\\u0000")}[^\\u0000]*$`);
  const cmdOk = new RegExp(cmd.pattern, "u");
  for (const ok of ["ls", " x ", "a\u00a0b"]) assert.ok(cmdOk.test(ok), JSON.stringify(ok));
  for (const bad of [" \t\n", "\u3000\u2028", "echo\u0000hi", "\u0000"]) assert.ok(!cmdOk.test(bad), JSON.stringify(bad));
});

test("history holds at most HISTORY_LIMIT messages; ts is int64", () => {
  assert.equal(schemas.MessageList.maxItems, limits.HISTORY_LIMIT);
  assert.deepEqual({ type: schemas.Message.properties.ts.type, format: schemas.Message.properties.ts.format }, { type: "integer", format: "int64" });
});

test("body limit: every request body says 64 KiB and can answer 413", () => {
  let bodies = 0;
  for (const [route, item] of Object.entries(doc.paths)) {
    for (const method of METHODS.filter((m) => item[m])) {
      const op = item[method];
      if (!op.requestBody) continue;
      bodies++;
      const ref = op.requestBody.$ref;
      const body = ref ? doc.components.requestBodies[ref.split("/").pop()] : op.requestBody;
      assert.equal(body["x-max-body-bytes"], limits.MAX_BODY_BYTES, `${method} ${route}`);
      assert.ok(op.responses["413"], `${method} ${route} documents 413`);
    }
  }
  assert.equal(bodies, 3);
  assert.match(doc.components.responses.PayloadTooLarge.description, new RegExp(`\\b${limits.MAX_BODY_BYTES}\\b`));
  for (const value of [limits.MAX_BODY_BYTES, limits.MAX_TEXT_CHARS, limits.EXEC_MAX_TIMEOUT_MS]) {
    assert.ok(doc.info.description.includes(String(value)), `info.description mentions ${value}`);
  }
});

test("the routes are the endpoints the worker names", () => {
  const names = /pub const ENDPOINTS: &str = "((?:[^"\\]|\\\s*)*)";/.exec(read("src/api/error.rs"));
  assert.ok(names, "ENDPOINTS found in src/api/error.rs");
  const endpoints = names[1].replace(/\\\s*/g, "").split(",").map((e) => e.trim()).sort();
  const documented = [];
  for (const [route, item] of Object.entries(doc.paths)) {
    for (const method of METHODS.filter((m) => item[m])) documented.push(`${method.toUpperCase()} ${route}`);
  }
  assert.deepEqual(documented.sort(), endpoints);
});

test("every status the worker gives (but 500) is documented", () => {
  const error = read("src/api/error.rs");
  const body = /pub fn status\(&self\) -> u16 \{([\s\S]*?)\n    \}/.exec(error)[1];
  const statuses = new Set([...body.matchAll(/=> (\d{3}),/g)].map((m) => m[1]));
  statuses.delete("500");
  const documented = new Set(["200", "207"]);
  for (const [, node] of walk(doc.paths)) {
    if (node.responses) for (const code of Object.keys(node.responses)) documented.add(code);
  }
  // 404 and 405 belong to no operation: unknown paths and wrong methods.
  for (const code of statuses) {
    if (code === "404" || code === "405") continue;
    assert.ok(documented.has(code), `status ${code} is documented`);
  }
  for (const code of ["502", "503", "504", "413", "400", "401"]) {
    for (const id of ["sendMessage", "execCommand"]) {
      const op = Object.values(doc.paths).flatMap((item) => METHODS.map((m) => item[m])).find((o) => o?.operationId === id);
      assert.ok(op.responses[code], `${id} documents ${code}`);
    }
  }
});

test("cleanup documents 200 and 207 bodies", () => {
  const cleanup = doc.paths["/api/rooms/{roomId}"].delete.responses;
  assert.equal(cleanup["200"].content["application/json"].schema.$ref, "#/components/schemas/CleanupResponse");
  assert.equal(cleanup["207"].content["application/json"].schema.$ref, "#/components/schemas/PartialCleanupResponse");
});

test("every $ref resolves", () => {
  for (const [where, node] of walk(doc)) {
    if (typeof node.$ref !== "string") continue;
    let target = doc;
    for (const part of node.$ref.replace(/^#\//, "").split("/")) target = target?.[part];
    assert.ok(target, `${where}: ${node.$ref}`);
  }
});

// Each room is an MCP server (POST /api/rooms/{roomId}/mcp), on the built
// worker in token mode with a real sandboxd, driven by the official SDK
// clients: TypeScript v2 (@modelcontextprotocol/client) in its three ways of
// choosing a revision and v1 (@modelcontextprotocol/sdk), and, once, the
// Python SDK (mcp, in a venv). Then the protocol's edge cases by hand, and
// run_command under the room's approvals.
import assert from "node:assert/strict";
import { execFileSync, spawnSync } from "node:child_process";
import { randomUUID } from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { after, before, describe, test } from "node:test";

import { Client as ClientV2, StreamableHTTPClientTransport as TransportV2 } from "@modelcontextprotocol/client";
import { Client as ClientV1 } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport as TransportV1 } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

import { protocols, watch } from "./support/feed.mjs";
import { bearer, invite } from "./support/rooms.mjs";
import { alone, ROOT, startStack } from "./support/stack.mjs";
import { sleep } from "./support/wait.mjs";

const SERVICE = "service-t0ken";

const CLIENTS = {
  "v2 (legacy handshake)": (url, token) => connectV2(url, token, undefined),
  "v2 (auto)": (url, token) => connectV2(url, token, { mode: "auto" }),
  "v2 (pinned 2026-07-28)": (url, token) => connectV2(url, token, { pin: "2026-07-28" }),
  v1: async (url, token) => {
    const c = new ClientV1({ name: "duet-test-v1", version: "1.0.0" });
    await c.connect(new TransportV1(new URL(url), { requestInit: { headers: { authorization: `Bearer ${token}` } } }));
    return c;
  },
};

async function connectV2(url, token, versionNegotiation) {
  const c = new ClientV2({ name: "duet-test-v2", version: "1.0.0" }, versionNegotiation ? { versionNegotiation } : {});
  await c.connect(new TransportV2(new URL(url), { requestInit: { headers: { authorization: `Bearer ${token}` } } }));
  return c;
}

describe("each room is an MCP server", () => {
  let stack, worker;
  const as = (token) => bearer(worker.url, token);
  const service = () => as(SERVICE);
  const mcpUrl = (room) => `${worker.url}/api/rooms/${room}/mcp`;
  /** One JSON-RPC POST by hand, with the given headers. */
  const rpc = (room, body, headers = {}, token = SERVICE) =>
    as(token)("POST", `/api/rooms/${room}/mcp`, typeof body === "string" ? body : JSON.stringify(body), { "content-type": "application/json", accept: "application/json, text/event-stream", ...headers });
  const request = (method, params = {}, id = 1) => ({ jsonrpc: "2.0", id, method, params });

  before(async () => {
    stack = await startStack({ vars: { DUET_API_TOKEN: SERVICE, DUET_APPROVAL_TIMEOUT_SECONDS: "3" } });
    worker = stack.worker;
  });
  after(() => stack.stop());

  for (const [name, connect] of Object.entries(CLIENTS)) {
    test(`TS ${name}: lists tools, runs a command a watcher sees on the feed, reads history, sends a message`, async () => {
      const room = randomUUID();
      const { token: writer } = await invite(service(), room, "writer", { name: "ana-agent" });
      const { token: watcherToken } = await invite(service(), room, "watcher", { name: "bo" });
      const feed = watch(worker.url, room, { protocols: protocols(watcherToken) });
      await feed.opened;
      const c = await connect(mcpUrl(room), writer);
      try {
        const { tools } = await c.listTools();
        assert.deepEqual(tools.map((t) => t.name), ["run_command", "start_job", "job_status", "stop_job", "read_file", "list_files", "write_file", "edit_file", "read_terminal", "write_terminal", "read_history", "send_message"]);
        assert.deepEqual(tools.map((t) => t.annotations.readOnlyHint), [false, false, true, false, true, true, false, false, true, false, true, false]);
        const ran = await c.callTool({ name: "run_command", arguments: { command: "echo from-mcp; echo oops >&2; sh -c 'exit 3'" } });
        assert.equal(ran.isError, false, JSON.stringify(ran));
        assert.deepEqual([ran.structuredContent.exitCode, ran.structuredContent.stdout, ran.structuredContent.stderr], [3, "from-mcp\n", "oops\n"]);
        assert.equal(ran.structuredContent.timedOut, false);
        assert.deepEqual(JSON.parse(ran.content[0].text), ran.structuredContent, "the same as text");
        const end = await feed.until((events) => events.find((e) => e.type === "command_end"));
        const command = feed.events.find((e) => e.type === "command");
        assert.deepEqual([command.cmd, command.source, command.askedBy], ["echo from-mcp; echo oops >&2; sh -c 'exit 3'", "mcp", "ana-agent"]);
        assert.ok(feed.events.some((e) => e.type === "output" && e.id === command.id && e.data.includes("from-mcp")));
        assert.equal(end.exitCode, 3);
        const timed = await c.callTool({ name: "run_command", arguments: { command: "sleep 5", timeoutMs: 300 } });
        assert.deepEqual([timed.structuredContent.timedOut, timed.structuredContent.exitCode], [true, 124]);
        const sent = await c.callTool({ name: "send_message", arguments: { text: "hello room" } });
        assert.equal(sent.isError, false, JSON.stringify(sent));
        assert.equal(sent.structuredContent.reply, "echo: hello room");
        const shown = await c.callTool({ name: "send_message", arguments: { text: "just saying", ask: false } });
        assert.deepEqual(shown.structuredContent, { asked: false });
        await feed.until((events) => events.find((e) => e.type === "message" && e.message.text === "just saying"));
        const history = await c.callTool({ name: "read_history", arguments: {} });
        assert.deepEqual(history.structuredContent.messages.map((m) => [m.role, m.text, m.userId]), [["user", "hello room", "ana-agent"], ["agent", "echo: hello room", undefined]]);
        const bad = await c.callTool({ name: "run_command", arguments: { command: "" } });
        assert.equal(bad.isError, true);
        assert.match(bad.content[0].text, /non-empty string/);
        // Every call is in the audit, newest first; commands by what ran.
        const audit = await service()("GET", `/api/rooms/${room}/audit`);
        const mine = audit.json.entries.filter((e) => e.source === "mcp");
        assert.deepEqual(
          mine.map((e) => [e.tool, e.command, e.outcome]),
          [
            ["read_history", "", "ran"],
            ["send_message", "just saying", "ran"],
            ["send_message", "hello room", "ran"],
            ["run_command", "sleep 5", "ran"],
            ["run_command", "echo from-mcp; echo oops >&2; sh -c 'exit 3'", "ran"],
          ],
          JSON.stringify(audit.json),
        );
        assert.ok(mine.every((e) => e.askedBy === "ana-agent"));
        assert.equal(mine.at(-1).exitCode, 3);
      } finally {
        await c.close();
        feed.close();
      }
    });
  }

  test("a watcher's token lists only the read-only tools and is refused the others", async () => {
    const room = randomUUID();
    const { token: watcher } = await invite(service(), room, "watcher", { name: "bo" });
    for (const connect of [CLIENTS["v2 (auto)"], CLIENTS.v1]) {
      const c = await connect(mcpUrl(room), watcher);
      try {
        const { tools } = await c.listTools();
        assert.deepEqual(tools.map((t) => t.name), ["job_status", "read_file", "list_files", "read_terminal", "read_history"]);
        const refused = await c.callTool({ name: "run_command", arguments: { command: "echo no" } });
        assert.equal(refused.isError, true);
        assert.equal(refused.content[0].text, "run_command needs the writer role; this token gives watcher");
        for (const [name, args] of [["start_job", { cmd: "echo no" }], ["stop_job", { jobId: "j0000000000000001" }]]) {
          const job = await c.callTool({ name, arguments: args });
          assert.deepEqual([job.isError, job.content[0].text], [true, `${name} needs the writer role; this token gives watcher`]);
        }
        const status = await c.callTool({ name: "job_status", arguments: { jobId: "j0000000000000001" } });
        assert.equal(status.isError, true, "a watcher may ask; the room has no such job");
        assert.match(status.content[0].text, /job/);
        const history = await c.callTool({ name: "read_history", arguments: {} });
        assert.deepEqual(history.structuredContent, { messages: [] });
      } finally {
        await c.close();
      }
    }
    const audit = await service()("GET", `/api/rooms/${room}/audit`);
    assert.deepEqual(
      audit.json.entries.map((e) => [e.tool, e.command, e.outcome, e.askedBy]),
      [0, 1].flatMap(() => [
        ["read_history", "", "ran", "bo"],
        ["job_status", "j0000000000000001", "failed", "bo"],
        ["stop_job", "j0000000000000001", "refused", "bo"],
        ["start_job", "echo no", "refused", "bo"],
        ["run_command", "echo no", "refused", "bo"],
      ]),
      "every call, the refused ones too; nothing ran",
    );
  });

  test("TS: a job started by MCP runs in the room, job_status reads its output, stop_job ends it; the policy judges its start", async () => {
    const room = randomUUID();
    const { token: writer } = await invite(service(), room, "writer", { name: "job-agent" });
    const c = await CLIENTS["v2 (auto)"](mcpUrl(room), writer);
    try {
      const started = await c.callTool({ name: "start_job", arguments: { cmd: "echo job-out; sleep 30", name: "server" } });
      assert.equal(started.isError, false, JSON.stringify(started));
      const { job } = started.structuredContent;
      assert.deepEqual([job.cmd, job.name, job.state, job.source, job.startedBy], ["echo job-out; sleep 30", "server", "running", "mcp", "job-agent"]);
      assert.deepEqual(JSON.parse(started.content[0].text), started.structuredContent, "the same as text");
      let status;
      for (let i = 0; i < 50 && !status?.structuredContent.job.output; i++) {
        await sleep(100);
        status = await c.callTool({ name: "job_status", arguments: { jobId: job.id } });
      }
      assert.deepEqual([status.structuredContent.job.state, status.structuredContent.job.output], ["running", "job-out\n"]);
      const stopped = await c.callTool({ name: "stop_job", arguments: { jobId: job.id } });
      assert.equal(stopped.structuredContent.job.state, "stopped", JSON.stringify(stopped));
      const bad = await c.callTool({ name: "job_status", arguments: { jobId: "nope" } });
      assert.deepEqual([bad.isError, bad.content[0].text], [true, "`jobId` must be a job's id, as start_job gave it"]);
      await service()("PUT", `/api/rooms/${room}/policy`, { deny: ["sleep"] });
      const denied = await c.callTool({ name: "start_job", arguments: { cmd: "sleep 1" } });
      assert.deepEqual([denied.isError, denied.content[0].text], [true, "not run: denied by the room's rule `sleep`"]);
      await service()("PUT", `/api/rooms/${room}/policy`, { agentCommands: "ask", deny: [] });
      const asking = c.callTool({ name: "start_job", arguments: { cmd: "echo approved" } });
      let waiting;
      for (let i = 0; i < 50 && !waiting; i++) {
        await sleep(100);
        [waiting] = (await service()("GET", `/api/rooms/${room}/approvals`)).json.approvals;
      }
      assert.equal(waiting.command, "echo approved");
      await service()("POST", `/api/rooms/${room}/approvals/${waiting.id}`, { decision: "approve", userId: "ana" });
      const approved = await asking;
      assert.equal(approved.structuredContent.job.cmd, "echo approved", JSON.stringify(approved));
      const audit = (await service()("GET", `/api/rooms/${room}/audit`)).json.entries;
      assert.deepEqual(
        audit.map((e) => [e.tool, e.command, e.outcome, e.rule ?? e.decidedBy ?? null]),
        [
          ["start_job", "echo approved", "ran", "ana"],
          ["start_job", "sleep 1", "refused", "sleep"],
          ["job_status", "nope", "failed", null],
          ["stop_job", job.id, "ran", null],
          ...audit.slice(4, -1).map(() => ["job_status", job.id, "ran", null]),
          ["start_job", "echo job-out; sleep 30", "ran", null],
        ],
      );
    } finally {
      await c.close();
    }
  });

  test("a room carries out at most 8 calls at once; the ninth is told to try again", async () => {
    const room = randomUUID();
    const { token: writer } = await invite(service(), room, "writer", { name: "busy-agent" });
    const call = (i) => rpc(room, request("tools/call", { name: "run_command", arguments: { command: "sleep 2" } }, i), { "mcp-protocol-version": "2025-11-25" }, writer);
    // Nine at once: the shell runs one command at a time, so the first
    // ends two seconds after the others have all arrived.
    const answers = await Promise.all(Array.from({ length: 9 }, (_, i) => call(i + 1)));
    const refused = answers.filter((res) => res.json.result.isError);
    assert.equal(refused.length, 1, answers.map((res) => res.text).join("\n"));
    assert.match(refused[0].json.result.content[0].text, /carrying out 8 MCP calls/);
    const after = await call(10);
    assert.equal(after.json.result.isError, false, "room again once they ended");
  });

  test("the Python SDK (mcp 2.3.0, default mode): lists tools, runs a command a watcher sees, reads history, is refused by role", async () => {
    const python = path.join(ROOT, "target/mcp-venv/bin/python");
    assert.ok(fs.existsSync(python), "the venv is made by scripts/test (ensure_mcp_venv in scripts/tools.sh)");
    const room = randomUUID();
    const { token: writer } = await invite(service(), room, "writer", { name: "py-agent" });
    const { token: watcherToken } = await invite(service(), room, "watcher", { name: "py-watcher" });
    const feed = watch(worker.url, room, { protocols: protocols(watcherToken) });
    await feed.opened;
    await service()("POST", `/api/rooms/${room}/message`, { text: "before python", userId: "ana" });
    const script = path.join(ROOT, "tests/e2e/support/mcp_client.py");
    const out = spawnSync(python, [script, mcpUrl(room), writer, watcherToken], { encoding: "utf8", timeout: 60_000 });
    assert.equal(out.status, 0, out.stderr);
    const said = JSON.parse(out.stdout);
    assert.deepEqual(said.tools, ["run_command", "start_job", "job_status", "stop_job", "read_file", "list_files", "write_file", "edit_file", "read_terminal", "write_terminal", "read_history", "send_message"]);
    assert.match(said.started.id, /^j[0-9a-f]{16}$/);
    assert.deepEqual([said.started.cmd, said.started.state, said.started.source, said.started.startedBy], ["sleep 30", "running", "mcp", "py-agent"]);
    assert.deepEqual([said.status.id, said.status.state], [said.started.id, "running"]);
    assert.equal(said.stopped.state, "stopped");
    assert.deepEqual([said.exitCode, said.stdout], [0, "from-python\n"]);
    assert.deepEqual(said.history.map((m) => m.text), ["before python", "echo: before python"]);
    assert.deepEqual(said.watcherTools, ["job_status", "read_file", "list_files", "read_terminal", "read_history"]);
    assert.deepEqual(said.refused, { isError: true, text: "run_command needs the writer role; this token gives watcher" });
    const command = await feed.until((events) => events.find((e) => e.type === "command" && e.source === "mcp"));
    assert.deepEqual([command.cmd, command.askedBy], ["echo from-python", "py-agent"]);
    await feed.until((events) => events.some((e) => e.type === "output" && e.id === command.id && e.data === "from-python\n"));
    feed.close();
    const audit = await service()("GET", `/api/rooms/${room}/audit`);
    assert.deepEqual(
      audit.json.entries.map((e) => [e.tool, e.outcome, e.askedBy]),
      [
        ["run_command", "refused", "py-watcher"],
        ["read_history", "ran", "py-agent"],
        ["stop_job", "ran", "py-agent"],
        ["job_status", "ran", "py-agent"],
        ["start_job", "ran", "py-agent"],
        ["run_command", "ran", "py-agent"],
      ],
    );
  });

  test("edge cases: unknown method, bad params, batches, a huge body, GET and DELETE, version headers, tokens", async () => {
    const room = randomUUID();
    const unknown = await rpc(room, request("resources/list"), { "mcp-protocol-version": "2025-11-25" });
    assert.deepEqual([unknown.status, unknown.json.error.code], [200, -32601]);
    const badParams = await rpc(room, request("tools/call", { arguments: {} }), { "mcp-protocol-version": "2025-11-25" });
    assert.deepEqual([badParams.status, badParams.json.error.code], [200, -32602]);
    const unknownTool = await rpc(room, request("tools/call", { name: "rm" }), { "mcp-protocol-version": "2025-11-25" });
    assert.equal(unknownTool.json.error.message, "Unknown tool: rm");
    const parse = await rpc(room, "{not json");
    assert.deepEqual([parse.status, parse.json.error.code], [400, -32700]);
    const batch = [request("ping", {}, 1), { jsonrpc: "2.0", method: "notifications/initialized" }, request("tools/list", {}, 2)];
    const old = await rpc(room, batch);
    assert.equal(old.status, 200);
    assert.deepEqual(old.json.map((r) => r.id), [1, 2]);
    assert.equal(old.json[1].result.tools.length, 12);
    const nine = await rpc(room, Array.from({ length: 9 }, (_, i) => request("ping", {}, i + 1)));
    assert.equal(nine.status, 400, "a batch holds at most 8 messages");
    assert.equal(nine.json.error.code, -32600);
    const later = await rpc(room, batch, { "mcp-protocol-version": "2025-06-18" });
    assert.deepEqual([later.status, later.json.error.code], [400, -32600]);
    const hugeCall = request("tools/call", { name: "run_command", arguments: { command: `echo ${"x".repeat(70_000)}` } });
    const huge = await alone(worker.url, "POST", `/api/rooms/${room}/mcp`, hugeCall, { authorization: `Bearer ${SERVICE}`, accept: "application/json, text/event-stream" });
    assert.equal(huge.status, 413);
    for (const method of ["GET", "DELETE"]) {
      const res = await service()(method, `/api/rooms/${room}/mcp`);
      assert.deepEqual([res.status, res.headers.get("allow")], [405, "POST"], method);
    }
    const unsupported = await rpc(room, request("tools/list"), { "mcp-protocol-version": "2024-01-01" });
    assert.equal(unsupported.status, 400);
    const meta = { "io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {} };
    const modern = { "mcp-protocol-version": "2026-07-28", "mcp-method": "tools/list" };
    const listed = await rpc(room, request("tools/list", { _meta: meta }), modern);
    assert.deepEqual([listed.status, listed.json.result.resultType, listed.json.result.cacheScope], [200, "complete", "private"]);
    const mismatch = await rpc(room, request("tools/list", { _meta: meta }), { ...modern, "mcp-method": "tools/call" });
    assert.deepEqual([mismatch.status, mismatch.json.error.code], [400, -32020]);
    const missing = await rpc(room, request("tools/list", { _meta: meta }), { "mcp-method": "tools/list" });
    assert.deepEqual([missing.status, missing.json.error.code], [400, -32020]);
    const future = await rpc(room, request("tools/list", { _meta: { ...meta, "io.modelcontextprotocol/protocolVersion": "2099-01-01" } }), modern);
    assert.deepEqual([future.status, future.json.error.code, future.json.error.data.requested], [400, -32022, "2099-01-01"]);
    const gone = await rpc(room, request("ping", { _meta: meta }), { ...modern, "mcp-method": "ping" });
    assert.deepEqual([gone.status, gone.json.error.code], [404, -32601]);
    const init = await rpc(room, request("initialize", { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "x", version: "1" } }));
    assert.equal(init.json.result.protocolVersion, "2025-06-18");
    assert.equal(init.headers.get("mcp-session-id"), null, "stateless");
    const note = await rpc(room, { jsonrpc: "2.0", method: "notifications/initialized" });
    assert.deepEqual([note.status, note.text], [202, ""]);
    const anonymous = await rpc(room, request("tools/list"), {}, null);
    assert.deepEqual([anonymous.status, anonymous.headers.get("www-authenticate")], [401, "Bearer"]);
    const crossSite = await rpc(room, request("tools/list"), { origin: "https://evil.example" });
    assert.equal(crossSite.status, 403);
  });

  test("a call during DELETE of the room is a tool error, not a failed request", async () => {
    const room = randomUUID();
    const { token: writer } = await invite(service(), room, "writer", { name: "ana" });
    const c = await CLIENTS["v2 (legacy handshake)"](mcpUrl(room), writer);
    try {
      const running = c.callTool({ name: "run_command", arguments: { command: "sleep 3; echo late" } });
      await sleep(500);
      const deleted = await service()("DELETE", `/api/rooms/${room}`);
      assert.equal(deleted.status, 200, deleted.text);
      // The command had reached the shell: the destroy ends it, and the
      // call answers so (a sandbox refusing it would be a tool error).
      const result = await running;
      const ended = result.isError || /destroyed/.test(result.structuredContent.stderr);
      assert.ok(ended, JSON.stringify(result));
    } finally {
      await c.close();
    }
  });

  test("allow rules hold: a line that could run more than it shows asks; honest commands pass; deny rules see through disguises", async () => {
    const room = randomUUID();
    const set = await service()("PUT", `/api/rooms/${room}/policy`, { agentCommands: "ask", allow: ["ls", "echo", "git status", "cat"], deny: ["rm"] });
    assert.equal(set.status, 200, set.text);
    const made = await service()("POST", `/api/rooms/${room}/sandbox/exec`, { cmd: "echo keep > victim" });
    assert.equal(made.status, 200, made.text);
    const { token: writer } = await invite(service(), room, "writer", { name: "ana-agent" });
    const c = await CLIENTS["v2 (auto)"](mcpUrl(room), writer);
    const run = (command) => c.callTool({ name: "run_command", arguments: { command } });
    /** At most 8 calls at once, the room's bound. */
    const all = async (commands) => {
      const results = [];
      for (let i = 0; i < commands.length; i += 8) results.push(...(await Promise.all(commands.slice(i, i + 8).map(run))));
      return results;
    };
    try {
      // The review's escapes and more: each asks, and nobody approves it.
      const escapes = [
        "ls $(touch pwn1)",
        "echo `touch pwn2`",
        "ls >(touch pwn3)",
        "cat <(touch pwn4)",
        "echo hi > pwn5",
        "git status $(touch pwn6)",
        'echo "$(touch pwn7)"',
        "ls\ntouch pwn8",
        "cat <<EOF\n$(touch pwn9)\nEOF",
        "PATH=. ls",
        "echo $((x[$(touch pwn10)]))",
        "ls && (touch pwn11)",
      ];
      for (const [i, result] of (await all(escapes)).entries()) {
        assert.deepEqual([result.isError, result.content[0].text], [true, "not run: expired, no writer approved it within 3 s"], escapes[i]);
      }
      // Honest commands still run unasked, each under its rule.
      const honest = ["ls -la", "git status", "cat victim", 'echo "hello world"', "ls 2>&1 | cat", "ls > /dev/null", "cat 'victim'"];
      for (const [i, result] of (await all(honest)).entries()) {
        assert.equal(result.isError, false, `${honest[i]}: ${JSON.stringify(result)}`);
      }
      // Deny rules see the command word through quotes, paths, wrappers and compound forms.
      const disguised = [
        "/bin/rm victim", "\\rm victim", "'rm' victim", "r''m victim", '"rm" victim', "command rm victim", "env rm victim",
        "env -i FOO=1 rm victim", "nohup rm victim", "time rm victim", "builtin command rm victim", "! rm victim", "(rm victim)",
        "{ rm victim; }", "if true; then rm -rf victim; fi", "for f in x; do rm victim; done", "while false; do rm victim; done",
        "echo $(rm victim)", "ls | rm victim", "true && rm victim", "exec rm victim", "X=1 rm victim",
      ];
      for (const [i, result] of (await all(disguised)).entries()) {
        assert.deepEqual([result.isError, result.content[0].text], [true, "not run: denied by the room's rule `rm`"], disguised[i]);
      }
      const left = await service()("POST", `/api/rooms/${room}/sandbox/exec`, { cmd: "ls; cat victim" });
      assert.equal(left.json.result.stdout, "victim\nkeep\n", "nothing of the escapes or the disguises ran");
    } finally {
      await c.close();
    }
  });

  test("approvals in ask mode: a run_command waits for a writer, then runs; denied is a tool error", async () => {
    const room = randomUUID();
    const set = await service()("PUT", `/api/rooms/${room}/policy`, { agentCommands: "ask", deny: ["rm"] });
    assert.equal(set.status, 200, set.text);
    const { token: writer } = await invite(service(), room, "writer", { name: "ana-agent" });
    const feed = watch(worker.url, room, { protocols: protocols(SERVICE) });
    await feed.opened;
    const c = await CLIENTS["v2 (auto)"](mcpUrl(room), writer);
    try {
      const waiting = c.callTool({ name: "run_command", arguments: { command: "echo approved" } });
      const asked = await feed.until((events) => events.find((e) => e.type === "approval"));
      assert.deepEqual([asked.approval.command, asked.approval.askedBy], ["echo approved", "ana-agent"]);
      const listed = await service()("GET", `/api/rooms/${room}/approvals`);
      assert.deepEqual(listed.json.approvals.map((a) => a.id), [asked.approval.id]);
      const decided = await service()("POST", `/api/rooms/${room}/approvals/${asked.approval.id}`, { decision: "approve", userId: "bo" });
      assert.equal(decided.status, 200, decided.text);
      const ran = await waiting;
      assert.equal(ran.isError, false, JSON.stringify(ran));
      assert.equal(ran.structuredContent.stdout, "approved\n");
      const denying = c.callTool({ name: "run_command", arguments: { command: "echo nope" } });
      const second = await feed.until((events) => events.filter((e) => e.type === "approval")[1]);
      await service()("POST", `/api/rooms/${room}/approvals/${second.approval.id}`, { decision: "deny", userId: "bo" });
      const denied = await denying;
      assert.deepEqual([denied.isError, denied.content[0].text], [true, "not run: denied by bo"]);
      const ruled = await c.callTool({ name: "run_command", arguments: { command: "rm -f x" } });
      assert.deepEqual([ruled.isError, ruled.content[0].text], [true, "not run: denied by the room's rule `rm`"]);
      const expiring = await c.callTool({ name: "run_command", arguments: { command: "echo nobody" } });
      assert.deepEqual([expiring.isError, expiring.content[0].text], [true, "not run: expired, no writer approved it within 3 s"]);
      const audit = await service()("GET", `/api/rooms/${room}/audit`);
      const outcomes = audit.json.entries.map((e) => [e.command, e.outcome, e.decidedBy ?? e.rule ?? null]);
      assert.deepEqual(outcomes, [["echo nobody", "refused", null], ["rm -f x", "refused", "rm"], ["echo nope", "refused", "bo"], ["echo approved", "ran", "bo"]]);
      // An MCP approval belongs to no paused exchange: the alarm takes none.
      const history = await service()("GET", `/api/rooms/${room}/messages`);
      assert.deepEqual(history.json.messages, []);
    } finally {
      await c.close();
      feed.close();
    }
  });
});

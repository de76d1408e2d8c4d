// The file tools (`read_file`, `list_files`, `write_file`, `edit_file`),
// carried out by the Sandbox object without the shell: the agent's, on both
// AI backends (an edit with one match, none and two; reads, listings and
// writes; a change that waits in `ask` with its diff shown, file rules that
// allow and deny, `off`), and an MCP client's through the official
// TypeScript SDK (a watcher lists only the reading tools).
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, describe, test } from "node:test";

import { Client } from "@modelcontextprotocol/client";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/client";

import { first, watch } from "./support/feed.mjs";
import { bearer, invite } from "./support/rooms.mjs";
import { startAgentStack, startStack } from "./support/stack.mjs";
import { sleep } from "./support/wait.mjs";

/** What the `calls` script heard, from the reply that ends with it. */
const heard = (reply) => JSON.parse(reply.slice(reply.indexOf("heard: ") + "heard: ".length));
/** A message that has the model call `calls` ([[name, arguments], ...]) in one answer. */
const calling = (calls, userId) => ({ text: `calls ${JSON.stringify(calls)}`, ...(userId ? { userId } : {}) });

for (const backend of ["workers-ai", "openai"]) {
  describe(`file tools (${backend})`, () => {
    let stack, worker;
    before(async () => {
      stack = await startAgentStack(backend, { vars: { AI_TIMEOUT_MS: "12000" }, openaiVars: { AI_TOOLS: "on" } });
      worker = stack.worker;
    });
    after(() => stack.stop());
    const put = (room, path, text) => worker.api("PUT", `/api/rooms/${room}/files?path=${encodeURIComponent(path)}`, text, { "content-type": "application/octet-stream" });
    const read = async (room, path) => (await worker.api("GET", `/api/rooms/${room}/files?path=${encodeURIComponent(path)}`)).text;

    test("edit_file replaces exactly one match; none and two are errors the model reads, and change nothing", async () => {
      const room = randomUUID();
      await put(room, "src/app.js", "let a = 1;\nlet b = 2;\nlet c = 1;\n");
      const w = watch(worker.url, room);
      await w.opened;
      const res = await worker.api(
        "POST",
        `/api/rooms/${room}/message`,
        calling(
          [
            ["edit_file", { path: "src/app.js", old_text: "let b = 2;", new_text: "let b = 20;" }],
            ["edit_file", { path: "src/app.js", old_text: "let z", new_text: "x" }],
            ["edit_file", { path: "src/app.js", old_text: " = 1;", new_text: " = 9;" }],
          ],
          "ana",
        ),
      );
      assert.equal(res.status, 200, res.text);
      assert.deepEqual(heard(res.json.reply), [
        "$ edit_file src/app.js\nreplaced the one match of `old_text` in src/app.js",
        "$ edit_file src/app.js\nnot run: `old_text` was not found in src/app.js; nothing was changed",
        "$ edit_file src/app.js\nnot run: `old_text` was found 2 times in src/app.js; include more of the lines around it so that it matches once; nothing was changed",
      ]);
      assert.equal(await read(room, "src/app.js"), "let a = 1;\nlet b = 20;\nlet c = 1;\n");
      assert.match(res.json.reply, /Output \(edit_file src\/app\.js\):\nreplaced the one match/);
      assert.match(res.json.reply, /Error \(edit_file src\/app\.js\):\n`old_text` was not found/);
      const changed = await w.until(first("file"));
      assert.deepEqual([changed.change, changed.path, changed.size, changed.source, changed.changedBy], ["written", "src/app.js", 34, "agent", "ana"]);
      // The agent's, after the file written through the route to begin with.
      const audit = (await worker.api("GET", `/api/rooms/${room}/audit`)).json.entries.filter((e) => e.source === "agent");
      assert.deepEqual(
        audit.map((e) => [e.tool, e.command, e.source, e.outcome, e.askedBy]),
        [
          ["edit_file", "src/app.js", "agent", "failed", "ana"],
          ["edit_file", "src/app.js", "agent", "failed", "ana"],
          ["edit_file", "src/app.js", "agent", "ran", "ana"],
        ],
      );
      w.close();
    });

    test("read_file answers numbered lines from an offset; list_files a directory; write_file a whole file; a binary file is said to be binary", async () => {
      const room = randomUUID();
      await put(room, "notes/a.txt", "one\ntwo\nthree\n");
      await put(room, "notes/bin", "\u0000\u0001");
      const res = await worker.api(
        "POST",
        `/api/rooms/${room}/message`,
        calling([
          ["read_file", { path: "notes/a.txt", offset: 2, limit: 1 }],
          ["list_files", { path: "notes" }],
          ["write_file", { path: "notes/new/b.md", content: "# B\n" }],
          ["read_file", { path: "notes/bin" }],
          ["read_file", { path: "../etc/passwd" }],
        ]),
      );
      assert.equal(res.status, 200, res.text);
      const [part, listing, written, binary, outside] = heard(res.json.reply);
      assert.equal(part, "$ read_file notes/a.txt\n     2\ttwo\n[lines 2-2 of 3; read on with offset 3]");
      assert.equal(listing, "$ list_files notes\nnotes: 2 entries\na.txt (14 bytes)\nbin (2 bytes)\n");
      assert.equal(written, "$ write_file notes/new/b.md\nwrote 4 bytes to notes/new/b.md");
      assert.equal(binary, "$ read_file notes/bin\nnotes/bin is a binary file of 2 bytes; not shown");
      assert.match(outside, /^\$ read_file \.\.\/etc\/passwd\nnot run: .*leaves the workspace/);
      assert.equal(await read(room, "notes/new/b.md"), "# B\n");
    });

    test("in ask, a write waits for a writer with its diff shown; file rules allow and deny; off refuses changes but reads", async () => {
      const room = randomUUID();
      const r = `/api/rooms/${room}`;
      await put(room, "README.md", "# App\nold line\n");
      await worker.api("PUT", `${r}/policy`, { agentCommands: "ask", allow: ["write_file docs/"], deny: ["write_file secrets"] });
      const feed = watch(worker.url, room);
      await feed.opened;
      const res = await worker.api(
        "POST",
        `${r}/message`,
        calling(
          [
            ["edit_file", { path: "README.md", old_text: "old line", new_text: "new line" }],
            ["write_file", { path: "docs/guide.md", content: "guide\n" }],
            ["edit_file", { path: "secrets/key", old_text: "a", new_text: "b" }],
          ],
          "bo",
        ),
      );
      assert.equal(res.status, 200, res.text);
      const [waiting, ...more] = res.json.approvals;
      assert.equal(more.length, 0, "the allowed and the denied change are decided already");
      assert.equal(waiting.command, "edit_file README.md");
      assert.equal(waiting.diff, "--- README.md\n+++ README.md\n@@ -2,1 +2,1 @@\n-old line\n+new line\n");
      const shown = await feed.until((events) => events.find((e) => e.type === "approval"));
      assert.equal(shown.approval.diff, waiting.diff, "the feed shows the diff too");
      assert.equal(await read(room, "README.md"), "# App\nold line\n", "nothing changed before the approval");
      const decided = await worker.api("POST", `${r}/approvals/${waiting.id}`, { decision: "approve", userId: "ana" });
      assert.equal(decided.status, 200, decided.text);
      const done = await feed.until((events) => events.find((e) => e.type === "message" && e.message.role === "agent" && e.message.text.includes("heard: ")));
      assert.deepEqual(heard(done.message.text), [
        "$ edit_file README.md\nreplaced the one match of `old_text` in README.md",
        "$ write_file docs/guide.md\nwrote 6 bytes to docs/guide.md",
        "$ edit_file secrets/key\nnot run: the room's rule `write_file secrets` denies it",
      ]);
      assert.equal(await read(room, "README.md"), "# App\nnew line\n");
      const audit = (await worker.api("GET", `${r}/audit`)).json.entries.filter((e) => e.source === "agent");
      assert.deepEqual(
        audit.map((e) => [e.tool ?? null, e.command, e.outcome, e.decidedBy ?? e.rule ?? null]),
        [
          ["edit_file", "secrets/key", "refused", "write_file secrets"],
          ["write_file", "docs/guide.md", "ran", "write_file docs/"],
          ["edit_file", "README.md", "ran", "ana"],
        ],
      );
      await worker.api("PUT", `${r}/policy`, { agentCommands: "off", allow: [], deny: [] });
      const off = await worker.api("POST", `${r}/message`, calling([["read_file", { path: "README.md" }], ["write_file", { path: "x", content: "y" }]]));
      assert.equal(off.status, 200, off.text);
      assert.match(off.json.reply, /Output \(read_file README\.md\):\n {5}1\t# App/);
      assert.match(off.json.reply, /Error \(write_file x\):\n/);
      assert.equal((await worker.api("GET", `${r}/files?path=x`)).status, 404);
      feed.close();
    });
  });
}

describe("file tools over MCP (official TypeScript SDK)", () => {
  const SERVICE = "service-token-for-file-tools";
  let stack;
  before(async () => {
    stack = await startStack({ vars: { DUET_API_TOKEN: SERVICE, DUET_APPROVAL_TIMEOUT_SECONDS: "20" } });
  });
  after(() => stack.stop());

  async function connect(room, token) {
    const client = new Client({ name: "file-tools-test", version: "1.0.0" });
    const url = new URL(`${stack.worker.url}/api/rooms/${room}/mcp`);
    await client.connect(new StreamableHTTPClientTransport(url, { requestInit: { headers: { authorization: `Bearer ${token}` } } }));
    return client;
  }

  test("a writer reads, lists, writes and edits; a watcher lists only the reading tools; ask shows the diff", async () => {
    const room = randomUUID();
    const service = bearer(stack.worker.url, SERVICE);
    const { token: writer } = await invite(service, room, "writer", { name: "mcp-ed" });
    const { token: watcher } = await invite(service, room, "watcher", { name: "wes" });
    const c = await connect(room, writer);
    try {
      const wrote = await c.callTool({ name: "write_file", arguments: { path: "src/lib.rs", content: "fn a() {}\nfn b() {}\n" } });
      assert.deepEqual([wrote.isError, wrote.structuredContent], [false, { path: "src/lib.rs", text: "wrote 20 bytes to src/lib.rs" }]);
      const edited = await c.callTool({ name: "edit_file", arguments: { path: "src/lib.rs", old_text: "fn b() {}", new_text: "fn b() { a() }" } });
      assert.equal(edited.isError, false, JSON.stringify(edited));
      const twice = await c.callTool({ name: "edit_file", arguments: { path: "src/lib.rs", old_text: "fn ", new_text: "pub fn " } });
      assert.deepEqual([twice.isError, twice.content[0].text], [true, "`old_text` was found 2 times in src/lib.rs; include more of the lines around it so that it matches once; nothing was changed"]);
      const read = await c.callTool({ name: "read_file", arguments: { path: "src/lib.rs" } });
      assert.equal(read.structuredContent.text, "     1\tfn a() {}\n     2\tfn b() { a() }\n");
      const listed = await c.callTool({ name: "list_files", arguments: {} });
      assert.equal(listed.structuredContent.text, "the workspace: 1 entries\nsrc/\n");
      await service("PUT", `/api/rooms/${room}/policy`, { agentCommands: "ask" });
      const asking = c.callTool({ name: "write_file", arguments: { path: "src/lib.rs", content: "fn a() {}\n" } });
      let waiting;
      for (let i = 0; i < 100 && !waiting; i++) {
        await sleep(100);
        [waiting] = (await service("GET", `/api/rooms/${room}/approvals`)).json.approvals;
      }
      assert.equal(waiting.command, "write_file src/lib.rs");
      assert.equal(waiting.diff, "--- src/lib.rs\n+++ src/lib.rs\n@@ -2,1 +2,0 @@\n-fn b() { a() }\n");
      await service("POST", `/api/rooms/${room}/approvals/${waiting.id}`, { decision: "deny", userId: "ana" });
      const denied = await asking;
      assert.equal(denied.isError, true);
      assert.match(denied.content[0].text, /denied by ana/);
    } finally {
      await c.close();
    }
    const w = await connect(room, watcher);
    try {
      const { tools } = await w.listTools();
      assert.deepEqual(tools.map((t) => t.name), ["job_status", "read_file", "list_files", "read_terminal", "read_history"]);
      const refused = await w.callTool({ name: "write_file", arguments: { path: "src/lib.rs", content: "pwned" } });
      assert.deepEqual([refused.isError, refused.content[0].text], [true, "write_file needs the writer role; this token gives watcher"]);
      const read = await w.callTool({ name: "read_file", arguments: { path: "src/lib.rs" } });
      assert.equal(read.structuredContent.text, "     1\tfn a() {}\n     2\tfn b() { a() }\n", "unchanged: denied, then refused");
    } finally {
      await w.close();
    }
    const audit = (await service("GET", `/api/rooms/${room}/audit`)).json.entries;
    assert.deepEqual(
      audit.map((e) => [e.tool, e.command, e.outcome, e.askedBy]),
      [
        ["read_file", "src/lib.rs", "ran", "wes"],
        ["write_file", "src/lib.rs", "refused", "wes"],
        ["write_file", "src/lib.rs", "refused", "mcp-ed"],
        ["list_files", "", "ran", "mcp-ed"],
        ["read_file", "src/lib.rs", "ran", "mcp-ed"],
        ["edit_file", "src/lib.rs", "failed", "mcp-ed"],
        ["edit_file", "src/lib.rs", "ran", "mcp-ed"],
        ["write_file", "src/lib.rs", "ran", "mcp-ed"],
      ],
    );
  });
});

// The room's shared terminal (GET /api/rooms/{roomId}/terminal, a WebSocket
// with subprotocol duet.term.v1), on the built worker in token mode with a
// real sandboxd, whose PTY runs a real bash: two writers typing into one
// shell and both seeing the answer; a watcher who may watch but whose input
// closes its socket (4403) and reaches nothing; a late joiner whose first
// screen shows a full-screen program as it is; Ctrl-C, `read`, a resize,
// the shell exiting and coming back; what typing leaves on record (the
// feed's `terminal_input`, the audit, nothing of what was typed unechoed);
// the upgrade's refusals; DELETE of the room closing every socket (4410);
// MCP's read_terminal and write_terminal; and the terminal in a container
// on the real Docker engine.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, describe, test } from "node:test";

import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";

import { startContainerWorker } from "./support/engine.mjs";
import { protocols, recorder, upgrade, watch } from "./support/feed.mjs";
import { bearer, invite } from "./support/rooms.mjs";
import { startStack } from "./support/stack.mjs";

const SERVICE = "service-token-for-the-terminal";
const PROTOCOL = "duet.term.v1";

/** A client of the room's terminal, with `token` if given: every frame it got, in order. */
function terminal(base, room, token) {
  const offered = token ? [PROTOCOL, protocols(token)[1]] : [PROTOCOL];
  const url = `${base.replace(/^http/, "ws")}/api/rooms/${room}/terminal`;
  let output = () => "";
  const socket = recorder(url, offered, { said: () => `output so far: ${JSON.stringify(output().slice(-400))}` });
  const frames = socket.events;
  output = () => frames.filter((f) => f.type === "output").map((f) => f.data).join("");
  return {
    ...socket,
    frames,
    output,
    type: (data) => socket.ws.send(JSON.stringify({ type: "input", data })),
    /** Resolves once the output holds `text`. */
    sees(text, ms) {
      return socket.until(() => output().includes(text), ms);
    },
  };
}

describe("the shared terminal", () => {
  let stack, worker, service;
  before(async () => {
    stack = await startStack({ vars: { DUET_API_TOKEN: SERVICE } });
    worker = stack.worker;
    service = bearer(worker.url, SERVICE);
  });
  after(() => stack.stop());
  const tokens = async (room) => {
    const of = async (role, name) => (await invite(service, room, role, { name })).token;
    return { ana: await of("writer", "ana"), bo: await of("writer", "bo"), wes: await of("watcher", "wes") };
  };

  test("two writers type into one shell and both see it; a watcher sees it and is closed with 4403 when it types", async () => {
    const room = randomUUID();
    const t = await tokens(room);
    const [ana, bo, wes] = [terminal(worker.url, room, t.ana), terminal(worker.url, room, t.bo), terminal(worker.url, room, t.wes)];
    for (const c of [ana, bo, wes]) assert.equal(await c.opened, PROTOCOL);
    for (const c of [ana, bo, wes]) {
      const screen = await c.until(() => c.frames[0]);
      assert.equal(screen.type, "screen");
      assert.deepEqual([screen.cols, screen.rows], [80, 24]);
    }
    ana.type("echo term-$((6*7))\r");
    for (const c of [ana, bo, wes]) await c.sees("term-42");
    bo.type("tty\r");
    await ana.until(() => /\/dev\/pts\/\d+/.test(ana.output()));
    const typing = await bo.until(() => bo.frames.find((f) => f.type === "typing" && f.name === "ana"));
    assert.equal(typing.role, "writer");
    wes.type("echo from-the-watcher\r");
    await wes.until(() => wes.ws.readyState >= WebSocket.CLOSING);
    if (wes.closed()) assert.equal(wes.closed().code, 4403);
    ana.type("echo still-here\r");
    await ana.sees("still-here");
    assert.ok(!ana.output().includes("from-the-watcher"), "nothing the watcher sent reached the shell");
    ana.close();
    bo.close();
  });

  test("a late joiner's screen is the terminal as it is: a full-screen program's text, not a replay", async () => {
    const room = randomUUID();
    const t = await tokens(room);
    const ana = terminal(worker.url, room, t.ana);
    await ana.opened;
    ana.type("clear; printf '\\e[2J\\e[H'; echo top-line; echo second-line\r");
    await ana.until(() => /top-line\r?\nsecond-line/.test(ana.output()));
    const late = terminal(worker.url, room, t.wes);
    await late.opened;
    const screen = await late.until(() => late.frames[0]);
    assert.equal(screen.type, "screen");
    assert.match(screen.data, /top-line/);
    assert.doesNotMatch(screen.data, /printf/, "the line typed before the screen was cleared is not on it");
    ana.close();
    late.close();
  });

  test("Ctrl-C stops a command; `read` is answered by typing; a resize reaches the shell; exit brings a new shell", async () => {
    const room = randomUUID();
    const t = await tokens(room);
    const ana = terminal(worker.url, room, t.ana);
    await ana.opened;
    ana.type("sleep 100\r");
    await new Promise((r) => setTimeout(r, 300));
    ana.type("\u0003");
    ana.type("echo after-ctrl-c\r");
    await ana.sees("after-ctrl-c", 5_000);
    ana.type("read x\r");
    ana.type("hello\r");
    ana.type("echo got-$x\r");
    await ana.sees("got-hello");
    ana.ws.send(JSON.stringify({ type: "resize", cols: 120, rows: 40 }));
    await new Promise((r) => setTimeout(r, 300));
    ana.type("stty size\r");
    await ana.sees("40 120");
    ana.type("exit\r");
    await new Promise((r) => setTimeout(r, 500));
    ana.type("echo back-again\r");
    await ana.sees("back-again", 10_000);
    ana.close();
  });

  test("typing is on record: terminal_input on the feed, a line a time in the audit; nothing typed unechoed", async () => {
    const room = randomUUID();
    const t = await tokens(room);
    const feed = watch(worker.url, room, { protocols: protocols(SERVICE) });
    await feed.opened;
    const ana = terminal(worker.url, room, t.ana);
    await ana.opened;
    ana.type("echo on-record\r");
    await ana.sees("on-record");
    const input = await feed.until((events) => events.find((e) => e.type === "terminal_input" && e.line));
    assert.deepEqual([input.by, input.line], ["ana", "echo on-record"]);
    // A password prompt: a reader of whole lines with echo off.
    ana.type("read -s pw; echo read-done\r");
    await new Promise((r) => setTimeout(r, 300));
    ana.type("my-s3cret\r");
    await ana.sees("read-done");
    ana.type("echo echo-back\r");
    await ana.sees("echo-back");
    await feed.until((events) => events.some((e) => e.type === "terminal_input" && e.line === "echo echo-back"));
    const audit = (await service("GET", `/api/rooms/${room}/audit`)).json.entries;
    const typed = audit.filter((e) => e.tool === "write_terminal").map((e) => [e.command, e.askedBy]).reverse();
    assert.deepEqual(typed, [
      ["echo on-record", "ana"],
      ["read -s pw; echo read-done", "ana"],
      ["(typed while the terminal did not echo: not recorded)", "ana"],
      ["echo echo-back", "ana"],
    ]);
    const everything = JSON.stringify(audit) + JSON.stringify(feed.events);
    assert.ok(!everything.includes("my-s3cret"), "what was typed unechoed is nowhere on record");
    ana.close();
    feed.close();
  });

  test("the upgrade needs the subprotocol, a token and the worker's own origin; DELETE of the room closes every socket with 4410", async () => {
    const room = randomUUID();
    const t = await tokens(room);
    const path = (headers) => upgrade(worker.url, room, headers, "", "terminal");
    assert.equal((await path({ "Sec-WebSocket-Protocol": PROTOCOL })).status, 401);
    const otherProtocol = await path({ "Sec-WebSocket-Protocol": `duet.v1, ${protocols(t.ana)[1]}` });
    assert.equal(otherProtocol.status, 400);
    assert.match(otherProtocol.body, /duet\.term\.v1/);
    const otherSite = await path({ "Sec-WebSocket-Protocol": `${PROTOCOL}, ${protocols(t.ana)[1]}`, Origin: "https://evil.example" });
    assert.equal(otherSite.status, 403);
    const [ana, wes] = [terminal(worker.url, room, t.ana), terminal(worker.url, room, t.wes)];
    await ana.opened;
    await wes.opened;
    assert.equal((await service("DELETE", `/api/rooms/${room}`)).status, 200);
    await new Promise((r) => setTimeout(r, 2000));
    console.log("XX", JSON.stringify([ana.closed(), wes.closed(), ana.ws.readyState, wes.ws.readyState]));
    for (const c of [ana, wes]) {
      const closed = await c.until(() => c.frames.find((f) => f.type === "closed"));
      assert.equal(closed.reason, "deleted");
      assert.equal(closed, c.frames.at(-1), "the last frame");
      // The close frame has reached it (the code shows once the connection
      // ends, which workerd leaves to the client here).
      await c.until(() => c.ws.readyState >= WebSocket.CLOSING);
      if (c.closed()) assert.equal(c.closed().code, 4410);
    }
  });

  test("MCP (official TypeScript SDK): read_terminal shows the screen to any role; write_terminal types for writers, under the room's policy", async () => {
    const room = randomUUID();
    const t = await tokens(room);
    const connect = async (token) => {
      const client = new Client({ name: "terminal-test", version: "1.0.0" });
      const url = new URL(`${worker.url}/api/rooms/${room}/mcp`);
      await client.connect(new StreamableHTTPClientTransport(url, { requestInit: { headers: { authorization: `Bearer ${token}` } } }));
      return client;
    };
    const ana = terminal(worker.url, room, t.ana);
    await ana.opened;
    const writer = await connect(t.bo);
    const watcher = await connect(t.wes);
    try {
      const typed = await writer.callTool({ name: "write_terminal", arguments: { data: "echo via-$((40+2))-mcp\r" } });
      assert.equal(typed.isError, false, JSON.stringify(typed));
      assert.deepEqual(typed.structuredContent, { bytes: 23, echo: true });
      await ana.sees("via-42-mcp");
      let screen;
      for (let i = 0; i < 50 && !screen?.text.includes("via-42-mcp\n"); i++) {
        await new Promise((r) => setTimeout(r, 100));
        screen = (await watcher.callTool({ name: "read_terminal", arguments: {} })).structuredContent;
      }
      assert.match(screen.text, /^via-42-mcp$/m);
      assert.deepEqual([screen.cols, screen.rows], [80, 24]);
      const refused = await watcher.callTool({ name: "write_terminal", arguments: { data: "echo no\r" } });
      assert.deepEqual([refused.isError, refused.content[0].text], [true, "write_terminal needs the writer role; this token gives watcher"]);
      await service("PUT", `/api/rooms/${room}/policy`, { deny: ["rm"] });
      const denied = await writer.callTool({ name: "write_terminal", arguments: { data: "rm -rf notes\r" } });
      assert.deepEqual([denied.isError, denied.content[0].text], [true, "not run: denied by the room's rule `rm`"]);
      const audit = (await service("GET", `/api/rooms/${room}/audit`)).json.entries.filter((e) => e.tool === "write_terminal");
      assert.ok(audit.some((e) => e.command === "echo via-$((40+2))-mcp" && e.source === "mcp" && e.outcome === "ran" && e.askedBy === "bo"), JSON.stringify(audit));
      assert.ok(audit.some((e) => e.outcome === "refused" && e.askedBy === "wes"), JSON.stringify(audit));
      assert.ok(audit.some((e) => e.outcome === "refused" && e.rule === "rm"), JSON.stringify(audit));
      assert.ok(!ana.output().includes("rm -rf notes"), "nothing refused was typed");
    } finally {
      await writer.close();
      await watcher.close();
      ana.close();
    }
  });
});

describe("the shared terminal in a container, on a Docker engine", () => {
  let stack;
  before(async () => {
    stack = await startContainerWorker("terminal");
  });
  after(() => stack?.stop());

  test("a login shell under a PTY in the room's container: typed into, its screen for a late joiner, gone with the room", async () => {
    const room = randomUUID();
    const { worker } = stack;
    // Open mode: everyone is an owner, and no token is needed.
    const ana = terminal(worker.url, room);
    await ana.opened;
    ana.type("echo in-$((6*7))-container; tty\r");
    await ana.sees("in-42-container", 30_000);
    await ana.until(() => /\/dev\/pts\/\d+/.test(ana.output()));
    const late = terminal(worker.url, room);
    await late.opened;
    const screen = await late.until(() => late.frames[0]);
    assert.match(screen.data, /in-42-container/);
    assert.equal((await worker.api("DELETE", `/api/rooms/${room}`)).status, 200);
    const closed = await ana.until(() => ana.frames.find((f) => f.type === "closed"));
    assert.equal(closed.reason, "deleted");
    late.close();
  });
});

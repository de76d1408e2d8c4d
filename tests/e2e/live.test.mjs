// A room's live feed (GET /api/rooms/{id}/live, a WebSocket held by the
// room's Sandbox object): watchers see the stored history, every message and
// every command's output as it happens, whoever sent it; the token is asked
// for; a slow watcher is dropped, and so is one that sends too much; a
// hibernating object loses no watcher; watchers are told when the room is
// deleted or expires; upgrades that are not the feed's are refused.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { DatabaseSync } from "node:sqlite";
import { after, before, describe, test } from "node:test";

import { closing, first, logged, protocols, upgrade, watch } from "./support/feed.mjs";
import { startStack, startWorker } from "./support/stack.mjs";
import { sleep, until } from "./support/wait.mjs";

const ofType = (type) => (events) => events.filter((e) => e.type === type);

describe("the live feed", () => {
  let stack, worker;
  before(async () => {
    stack = await startStack();
    worker = stack.worker;
  });
  after(() => stack.stop());

  test("two watchers see the history, each other's messages and a command's output in order", async () => {
    const room = randomUUID();
    await worker.api("POST", `/api/rooms/${room}/message`, { text: "before", userId: "ana" });
    const [a, b] = [watch(worker.url, room), watch(worker.url, room)];
    assert.equal(await a.opened, "duet.v1");
    await b.opened;
    for (const w of [a, b]) {
      const hello = await w.until(first("hello"));
      assert.equal(hello.seq, 2, "the two messages before are the log's first events");
      assert.equal(hello.resumed, false);
      assert.deepEqual(hello.history.map((m) => m.text), ["before", "echo: before"]);
    }
    const sent = await worker.api("POST", `/api/rooms/${room}/message`, { text: "hi all", userId: "bo" });
    assert.equal(sent.status, 200);
    await worker.api("POST", `/api/rooms/${room}/sandbox/exec`, { cmd: "for i in 1 2 3; do echo $i; sleep 0.2; done" });
    for (const w of [a, b]) {
      const messages = await w.until((events) => (ofType("message")(events).length === 2 ? ofType("message")(events) : null));
      assert.deepEqual(messages.map((e) => [e.message.role, e.message.text, e.message.userId]), [["user", "hi all", "bo"], ["agent", "echo: hi all", undefined]]);
      const end = await w.until((events) => events.find((e) => e.type === "command_end"));
      const command = w.events.find((e) => e.type === "command");
      assert.deepEqual([command.cmd, command.source], ["for i in 1 2 3; do echo $i; sleep 0.2; done", "exec"]);
      const outputs = w.events.filter((e) => e.type === "output" && e.id === command.id);
      assert.equal(outputs.map((e) => e.data).join(""), "1\n2\n3\n");
      assert.ok(outputs.every((o) => o.seq > command.seq && o.seq < end.seq), "start, then output, then end");
      assert.deepEqual([end.id, end.exitCode, end.truncated, end.timedOut], [command.id, 0, false, false]);
      const numbers = logged(w.events).map((e) => e.seq);
      assert.deepEqual(numbers, numbers.map((_, i) => 3 + i), "every event once, in order, after the hello's");
    }
    a.close();
    b.close();
  });

  test("the agent's <run> commands appear too, marked as the agent's", async () => {
    const room = randomUUID();
    const w = watch(worker.url, room);
    await w.opened;
    await worker.api("POST", `/api/rooms/${room}/message`, { text: "raw Looking. <run>echo from-agent</run>" });
    const end = await w.until((events) => events.find((e) => e.type === "command_end"));
    const command = w.events.find((e) => e.type === "command");
    assert.deepEqual([command.cmd, command.source], ["echo from-agent", "agent"]);
    assert.ok(w.events.some((e) => e.type === "output" && e.data === "from-agent\n"));
    const messages = await w.until((events) => (ofType("message")(events).length === 2 ? ofType("message")(events) : null));
    assert.ok(messages[0].seq < command.seq && end.seq < messages[1].seq, "user message, command, reply");
    w.close();
  });

  test("a failed exchange is announced, and a plain GET is told to upgrade", async () => {
    const room = randomUUID();
    const w = watch(worker.url, room);
    await w.opened;
    assert.equal((await worker.api("POST", `/api/rooms/${room}/message`, { text: "fail" })).status, 503);
    const failed = await w.until(first("failed"));
    assert.match(failed.error, /AI backend is busy/);
    const plain = await worker.api("GET", `/api/rooms/${room}/live`);
    assert.equal(plain.status, 426);
    assert.match(plain.json.error, /WebSocket/);
    w.close();
  });

  test("a watcher outlives its object's hibernation and misses nothing", async () => {
    const room = randomUUID();
    const w = watch(worker.url, room);
    await w.opened;
    await w.until(first("hello"));
    await worker.evict("Sandbox", `sandbox-${room}`);
    await worker.api("POST", `/api/rooms/${room}/sandbox/exec`, { cmd: "echo after-hibernation" });
    await worker.api("POST", `/api/rooms/${room}/message`, { text: "still here" });
    await w.until((events) => ofType("message")(events).length === 2 || null);
    assert.ok(w.events.some((e) => e.type === "output" && e.data === "after-hibernation\n"));
    assert.equal(w.closed(), null);
    w.close();
  });

  test("a command sent to the public exec route shows as exec, whatever its query says", async () => {
    const room = randomUUID();
    const w = watch(worker.url, room);
    await w.until(first("hello"));
    const res = await worker.api("POST", `/api/rooms/${room}/sandbox/exec?source=agent`, { cmd: "echo not-the-agent" });
    assert.equal(res.status, 200, res.text);
    const command = await w.until(first("command"));
    assert.deepEqual([command.cmd, command.source], ["echo not-the-agent", "exec"]);
    w.close();
  });

  test("a binary frame over 1 KiB is closed with 1009, as a text one; small ones are ignored", async () => {
    const room = randomUUID();
    const [small, big, text] = [watch(worker.url, room), watch(worker.url, room), watch(worker.url, room)];
    await Promise.all([small, big, text].map((w) => w.until(first("hello"))));
    small.ws.send(new Uint8Array(16));
    big.ws.send(new Uint8Array(1025));
    text.ws.send("x".repeat(1025));
    for (const w of [big, text]) {
      await w.until(closing(w));
      if (w.closed()) assert.equal(w.closed().code, 1009);
    }
    await worker.api("POST", `/api/rooms/${room}/sandbox/exec`, { cmd: "echo still" });
    await small.until((events) => events.find((e) => e.type === "output" && e.data === "still\n"));
    assert.equal(small.closed(), null);
    small.close();
  });

  test("DELETE tells the watchers, then closes them with 4410", async () => {
    const room = randomUUID();
    const w = watch(worker.url, room);
    await w.until(first("hello"));
    assert.equal((await worker.api("DELETE", `/api/rooms/${room}`)).status, 200);
    const closed = await w.until(first("closed"));
    assert.equal(closed.reason, "deleted");
    assert.equal(closed, w.events.at(-1), "the last event");
    await w.until(closing(w));
    if (w.closed()) assert.equal(w.closed().code, 4410);
  });

  test("an upgrade without duet.v1 is a JSON 400; from another site's page a 403; from the worker's own a 101", async () => {
    const room = randomUUID();
    for (const headers of [{}, { "Sec-WebSocket-Protocol": "chat" }]) {
      const res = await upgrade(worker.url, room, headers);
      assert.equal(res.status, 400, res.head);
      assert.match(JSON.parse(res.body).error, /subprotocol duet\.v1/);
    }
    const foreign = await upgrade(worker.url, room, { "Sec-WebSocket-Protocol": "duet.v1", Origin: "https://evil.example" });
    assert.equal(foreign.status, 403, foreign.head);
    assert.match(JSON.parse(foreign.body).error, /cross-site request refused/);
    const own = await upgrade(worker.url, room, { "Sec-WebSocket-Protocol": "duet.v1", Origin: worker.url });
    assert.equal(own.status, 101, own.head);
    assert.match(own.head, /sec-websocket-protocol: duet\.v1/i);
  });

  test("a watcher that does not keep up is dropped; the others are not", async () => {
    const room = randomUUID();
    const slow = watch(worker.url, room, { ack: false });
    const fast = watch(worker.url, room);
    await Promise.all([slow.opened, fast.opened]);
    // About 65 events per command (1 MiB of output in 16 KiB pieces).
    for (let i = 0; i < 5; i++) {
      await worker.api("POST", `/api/rooms/${room}/sandbox/exec`, { cmd: "head -c 1048576 /dev/zero | tr '\\0' x" });
    }
    // The close frame (4008) has reached it: its socket is closing (the
    // code shows once the connection ends, here when the worker stops).
    await slow.until(closing(slow));
    assert.ok(logged(slow.events).length <= 256, `${logged(slow.events).length} events reached the slow watcher`);
    if (slow.closed()) assert.equal(slow.closed().code, 4008);
    await fast.until((events) => ofType("command_end")(events).length === 5);
    assert.equal(fast.closed(), null);
    fast.close();
  });
});

describe("the live feed with a token", () => {
  let worker;
  const TOKEN = "s3cret/with+odd=chars";
  before(async () => {
    worker = await startWorker({ vars: { DUET_API_TOKEN: TOKEN } });
  });
  after(() => worker.stop());

  test("a watcher without the token is refused; with it as a subprotocol it is let in", async () => {
    const room = randomUUID();
    const refused = watch(worker.url, room);
    await assert.rejects(refused.opened);
    const wrong = watch(worker.url, room, { protocols: protocols("nope") });
    await assert.rejects(wrong.opened);
    const allowed = watch(worker.url, room, { protocols: protocols(TOKEN) });
    assert.equal(await allowed.opened, "duet.v1");
    await allowed.until(first("hello"));
    allowed.close();
  });
});

// A room forgotten after ROOM_TTL_SECONDS unused tells its watchers, whichever
// part of it expired: the DuetAgent's history (its clock runs from the last
// message or history read) or the Sandbox object's files (from the last
// command).
describe("the live feed of a room that expires", () => {
  const TTL_S = 3;
  let stack, worker;
  before(async () => {
    stack = await startStack({ vars: { ROOM_TTL_SECONDS: String(TTL_S) } });
    worker = stack.worker;
  });
  after(() => stack.stop());
  /** Which objects logged the room's expiry, once one has (none if none has within 5 s). */
  function expiries(room) {
    const expired = () => {
      const objects = worker.logs.filter((l) => l.includes('"event":"expire"') && l.includes(room)).map((l) => JSON.parse(l).object);
      return objects.length > 0 && objects;
    };
    return until("the room's expiry", expired, 5_000).catch(() => []);
  }

  test("a room that only chats: its history expires, and the watchers are told", async () => {
    const room = randomUUID();
    const w = watch(worker.url, room);
    await w.until(first("hello"));
    const closed = await w.until(first("closed"), TTL_S * 1000 + 8_000);
    assert.equal(closed.reason, "expired");
    assert.deepEqual(await expiries(room), ["DuetAgent"]);
    await w.until(closing(w));
  });

  test("a room whose files expire while its history is in use: the watchers are told", async () => {
    const room = randomUUID();
    assert.equal((await worker.api("POST", `/api/rooms/${room}/sandbox/exec`, { cmd: "true" })).status, 200);
    const w = watch(worker.url, room);
    await w.until(first("hello"));
    // Reading the history keeps the DuetAgent's part of the room alive.
    const pending = [];
    const reads = setInterval(() => pending.push(worker.api("GET", `/api/rooms/${room}/messages`)), 500);
    try {
      const closed = await w.until(first("closed"), TTL_S * 1000 + 8_000);
      assert.equal(closed.reason, "expired");
      assert.deepEqual(await expiries(room), ["Sandbox"]);
    } finally {
      clearInterval(reads);
      // None may still be in flight when the worker stops.
      for (const read of await Promise.allSettled(pending)) assert.equal(read.status, "fulfilled", String(read.reason));
    }
  });
});

// The DuetAgent publishes a room's messages only while someone watches; the
// Sandbox object tells it when the first watcher comes and the last one goes.
// Read from the agent's own storage: a worker of its own holds one room.
describe("whether anyone watches", () => {
  let worker;
  before(async () => {
    worker = await startWorker();
  });
  after(() => worker.stop());

  /** The room's DuetAgent's stored flag, or undefined before it has one. */
  function agentWatching() {
    const dir = fs.readdirSync(worker.persistDir, { recursive: true })
      .find((f) => f.endsWith(".sqlite") && f.includes("DuetAgent"));
    if (!dir) return undefined;
    const db = new DatabaseSync(path.join(worker.persistDir, dir), { readOnly: true });
    try {
      return db.prepare("SELECT watching FROM feed WHERE id = 1").get()?.watching;
    } catch {
      return undefined;
    } finally {
      db.close();
    }
  }

  test("the last watcher's leaving is told, in a room that never ran a command", async () => {
    const room = randomUUID();
    const a = watch(worker.url, room);
    await a.until(first("hello"));
    await until("the agent to hear of a watcher", () => agentWatching() === 1, 5_000);
    a.close();
    await until("the agent to hear the last watcher left", () => agentWatching() === 0, 5_000);
  });
});

// What a local restart of workerd (the nearest thing to a deploy here: the
// code under every object is replaced) does to a live room: watchers' sockets
// close and the page's watchers reconnect; an exchange in flight is cut whole;
// nothing stored is lost, and the next message reaches the new watchers.
describe("a restart between two messages", () => {
  test("loses nothing stored; watchers reconnect to the new worker and see the next message", async () => {
    const old = await startWorker();
    const room = randomUUID();
    let watchers, inFlight;
    try {
      assert.equal((await old.api("POST", `/api/rooms/${room}/message`, { text: "one", userId: "ana" })).status, 200);
      watchers = [watch(old.url, room), watch(old.url, room)];
      for (const w of watchers) await w.until(first("hello"));
      // An exchange the model never answers: in flight when the worker goes.
      inFlight = old.api("POST", `/api/rooms/${room}/message`, { text: "stall" }).then((res) => res, (e) => e);
      await sleep(300);
    } finally {
      await old.stop();
    }
    assert.ok((await inFlight) instanceof Error, "the exchange in flight was cut");
    for (const w of watchers) await w.until(() => w.closed(), 5_000);

    const restarted = await startWorker({ persistDir: old.persistDir });
    try {
      const again = [watch(restarted.url, room), watch(restarted.url, room)];
      for (const w of again) {
        const hello = await w.until(first("hello"));
        assert.deepEqual(hello.history.map((m) => m.text), ["one", "echo: one"], "the stored exchange, not the cut one");
      }
      const sent = await restarted.api("POST", `/api/rooms/${room}/message`, { text: "two", userId: "bo" });
      assert.equal(sent.status, 200);
      for (const w of again) {
        const messages = await w.until((events) => (ofType("message")(events).length === 2 ? ofType("message")(events) : null));
        assert.deepEqual(messages.map((e) => e.message.text), ["two", "echo: two"]);
        w.close();
      }
      const { json } = await restarted.api("GET", `/api/rooms/${room}/messages`);
      assert.deepEqual(json.messages.map((m) => m.text), ["one", "echo: one", "two", "echo: two"]);
    } finally {
      await restarted.stop();
    }
  });
});

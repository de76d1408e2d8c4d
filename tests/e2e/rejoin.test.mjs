// Rejoining a room's live feed: every event is numbered in the room's log,
// so a watcher that comes back with `?since=` gets exactly what it missed,
// one whose missed events were trimmed gets a `gap` and a fresh snapshot,
// and one that joins late is given the terminal's recent past in its
// `hello`; the log outlives an eviction and a restart; while a command runs
// quiet, heartbeats go out and a watcher that answers none is let go.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, describe, test } from "node:test";

import { first, logged, upgrade, watch } from "./support/feed.mjs";
import { exec } from "./support/rooms.mjs";
import { startStack, startWorker } from "./support/stack.mjs";

const TERMINAL = new Set(["command", "output", "command_end"]);
/** What a terminal shows of a watcher's events: commands, output, ends. */
const pane = (events) => events.filter((e) => TERMINAL.has(e.type)).map((e) => (e.type === "command" ? `$ ${e.cmd}\n` : e.type === "output" ? e.data : `[exit ${e.exitCode}]\n`)).join("");
const lastSeq = (w) => Math.max(...w.events.map((e) => e.seq));

describe("rejoining the live feed", () => {
  let stack, worker;
  before(async () => {
    stack = await startStack({ vars: { FEED_HEARTBEAT_MS: "200" } });
    worker = stack.worker;
  });
  after(() => stack.stop());

  test("a watcher that lost its socket resumes: what it missed comes once, in order, and nothing else", async () => {
    const room = randomUUID();
    const steady = watch(worker.url, room);
    const dropped = watch(worker.url, room);
    await Promise.all([steady.until(first("hello")), dropped.until(first("hello"))]);
    await exec(worker, room, "echo before");
    await dropped.until((events) => events.some((e) => e.type === "command_end"));
    const since = lastSeq(dropped);
    dropped.close();
    await dropped.until(() => dropped.closed());
    await exec(worker, room, "for i in 1 2 3; do echo line $i; sleep 0.1; done");
    await worker.api("POST", `/api/rooms/${room}/message`, { text: "while away", userId: "ana" });
    await exec(worker, room, "echo err >&2; false");

    const back = watch(worker.url, room, { since });
    const hello = await back.until(first("hello"));
    assert.equal(hello.resumed, true);
    assert.equal(hello.seq, since);
    assert.deepEqual([hello.history, hello.recent], [[], []], "a resumed watcher keeps what it shows");
    const expected = logged(steady.events).filter((e) => e.seq > since);
    await back.until((events) => logged(events).length >= expected.length || null);
    const strip = (events) => events.map(({ at, ...e }) => e);
    assert.deepEqual(strip(logged(back.events)), strip(expected), "exactly what it missed, in order, none twice");
    assert.match(pane(logged(back.events)), /^\$ for i.*\nline 1\nline 2\nline 3\n\[exit 0\]\n\$ echo err.*\nerr\n\[exit 1\]\n$/s);
    assert.ok(logged(back.events).some((e) => e.type === "message" && e.message.text === "while away"));
    // Then it is live again.
    await exec(worker, room, "echo live again");
    await back.until((events) => events.some((e) => e.type === "output" && e.data === "live again\n"));
    for (const w of [steady, back]) w.close();
  });

  test("a late joiner's hello shows the terminal as an early watcher saw it, though nobody watched", async () => {
    const room = randomUUID();
    const early = watch(worker.url, room);
    await early.until(first("hello"));
    await exec(worker, room, "printf 'a\\nb\\n'");
    early.close();
    // Nobody watches these: their output reaches the log whole, at the end.
    await exec(worker, room, "ls / | head -3; python3 --version 2>&1 || true");
    await exec(worker, room, "printf 'x%.0s' $(seq 1 40000) >&2");
    const late = watch(worker.url, room);
    const hello = await late.until(first("hello"));
    assert.equal(hello.resumed, false);
    const recent = hello.recent;
    assert.ok(recent.every((e, i) => i === 0 || e.seq > recent[i - 1].seq), "oldest first");
    assert.equal(recent[0].type, "command", "the pane starts at a command");
    assert.ok(recent.at(-1).seq <= hello.seq);
    const shown = pane(recent);
    assert.match(shown, /\$ printf 'a\\nb\\n'\na\nb\n\[exit 0\]\n\$ ls \/ \| head -3.*\n(.+\n){3}/s);
    assert.ok(shown.endsWith(`${"x".repeat(40000)}[exit 0]\n`), "the newest command's output, whole");
    // What the early watcher was sent of the first command is what the late one is shown.
    assert.equal(pane(early.events), pane(recent.filter((e) => e.seq <= lastSeq(early))));
    late.close();
  });

  test("the terminal's recent past is bounded: whole events up to 64 KiB, from a command on", async () => {
    const room = randomUUID();
    for (let i = 0; i < 4; i++) await exec(worker, room, `head -c 30000 /dev/zero | tr '\\0' ${i}`);
    const late = watch(worker.url, room);
    const { recent } = await late.until(first("hello"));
    const bytes = recent.reduce((n, e) => n + JSON.stringify({ ...e, seq: undefined }).length, 0);
    assert.ok(bytes <= 64 * 1024, `${bytes} bytes`);
    assert.equal(recent[0].type, "command");
    assert.deepEqual(recent.filter((e) => e.type === "command").map((e) => e.cmd.at(-1)), ["2", "3"], "the two newest that fit");
    late.close();
  });

  test("a number the log no longer has, or never had, gets a gap and a fresh snapshot; a bad one a 400", async () => {
    const trimming = await startWorker({ vars: { FEED_LOG_EVENTS: "10" } });
    try {
      const room = randomUUID();
      const api = (text) => trimming.api("POST", `/api/rooms/${room}/message`, { text });
      for (let i = 0; i < 8; i++) assert.equal((await api(`m${i}`)).status, 200);
      const old = watch(trimming.url, room, { since: 1 });
      const gap = await old.until(first("gap"));
      assert.equal(gap.since, 1);
      const hello = await old.until(first("hello"));
      assert.equal(hello.resumed, false);
      assert.equal(hello.seq, 16);
      assert.equal(old.events[0].type, "gap", "the gap comes first");
      assert.deepEqual(hello.history.map((m) => m.text).slice(-2), ["m7", "echo: m7"]);
      // The oldest kept can still be resumed after: it is the seventh.
      const edge = watch(trimming.url, room, { since: 6 });
      assert.equal((await edge.until(first("hello"))).resumed, true);
      await edge.until((events) => logged(events).length === 10 || null);
      assert.deepEqual(logged(edge.events).map((e) => e.seq), [7, 8, 9, 10, 11, 12, 13, 14, 15, 16]);
      const trimmed = watch(trimming.url, room, { since: 5 });
      await trimmed.until(first("gap"));
      const future = watch(trimming.url, room, { since: 99 });
      assert.deepEqual((await future.until(first("gap"))).since, 99);
      for (const w of [old, edge, trimmed, future]) w.close();
      const bad = await upgrade(trimming.url, room, { "Sec-WebSocket-Protocol": "duet.v1" }, "?since=soon");
      assert.equal(bad.status, 400);
      assert.match(JSON.parse(bad.body).details.since[0], /whole number/);
    } finally {
      await trimming.stop();
    }
  });

  test("the log outlives the object's eviction: a resume after it misses nothing", async () => {
    const room = randomUUID();
    await exec(worker, room, "echo one");
    const w = watch(worker.url, room);
    const hello = await w.until(first("hello"));
    w.close();
    await worker.evict("Sandbox", `sandbox-${room}`);
    await exec(worker, room, "echo two");
    const back = watch(worker.url, room, { since: hello.seq });
    assert.equal((await back.until(first("hello"))).resumed, true);
    await back.until((events) => events.some((e) => e.type === "command_end") || null);
    assert.equal(pane(logged(back.events)), "$ echo two\ntwo\n[exit 0]\n");
    back.close();
  });

  test("while a command runs quiet, heartbeats go out; a watcher that answers none is let go", async () => {
    const room = randomUUID();
    const answering = watch(worker.url, room);
    const silent = watch(worker.url, room, { ack: false });
    await Promise.all([answering.until(first("hello")), silent.until(first("hello"))]);
    const ran = exec(worker, room, "sleep 1.5; echo done");
    const beats = await answering.until((events) => (events.filter((e) => e.type === "heartbeat").length >= 3 ? events.filter((e) => e.type === "heartbeat") : null));
    const started = answering.events.find((e) => e.type === "command");
    assert.ok(beats.every((b) => b.seq === started.seq), "a heartbeat carries the newest event's number");
    await silent.until(() => silent.closed() || silent.ws.readyState >= WebSocket.CLOSING || null);
    assert.ok(silent.events.some((e) => e.type === "heartbeat"), "it was asked");
    if (silent.closed()) assert.equal(silent.closed().code, 4408);
    assert.equal((await ran).status, 200);
    await answering.until((events) => events.some((e) => e.type === "output" && e.data === "done\n"));
    assert.equal(answering.closed(), null, "the one that answers stays");
    answering.close();
  });

  test("a ping is answered without a frame of the log, and presence tells who joins and leaves", async () => {
    const room = randomUUID();
    const ana = watch(worker.url, room);
    await ana.until(first("hello"));
    ana.ws.send(JSON.stringify({ type: "name", name: "ana" }));
    const pong = new Promise((resolve) => ana.ws.addEventListener("message", (m) => m.data === '{"type":"pong"}' && resolve()));
    ana.ws.send('{"type":"ping"}');
    await pong;
    // The README's spelling, with a space, is answered too (by the object, not the runtime).
    for (const spelled of ['{"type": "ping"}', '{ "type" : "ping" }']) {
      const again = new Promise((resolve) => ana.ws.addEventListener("message", (m) => m.data === '{"type":"pong"}' && resolve()));
      ana.ws.send(spelled);
      await again;
    }
    const bo = watch(worker.url, room);
    await bo.until(first("hello"));
    bo.ws.send(JSON.stringify({ type: "name", name: "bo" }));
    const names = (e) => e.watchers.map((w) => w.name).sort().join(",");
    await ana.until((events) => events.some((e) => e.type === "presence" && names(e) === "ana,bo") || null);
    bo.close();
    await ana.until((events) => events.filter((e) => e.type === "presence").at(-1)?.watchers.length === 1 || null);
    assert.equal(names(ana.events.filter((e) => e.type === "presence").at(-1)), "ana");
    assert.equal(ana.closed(), null);
    ana.close();
  });
});

describe("the log across a restart", () => {
  test("a watcher of the old worker resumes on the new one; a new one gets the terminal's past", async () => {
    const old = await startStack();
    const room = randomUUID();
    let since;
    try {
      await exec(old.worker, room, "echo kept");
      const w = watch(old.worker.url, room);
      since = (await w.until(first("hello"))).seq;
      await exec(old.worker, room, "echo missed");
      w.close();
    } finally {
      await old.worker.stop();
    }
    const restarted = await startWorker({ persistDir: old.worker.persistDir, vars: { SANDBOX_URL: old.sandboxd.url } });
    try {
      const back = watch(restarted.url, room, { since: since });
      assert.equal((await back.until(first("hello"))).resumed, true);
      await back.until((events) => events.some((e) => e.type === "command_end") || null);
      assert.match(pane(logged(back.events)), /^\$ echo missed\nmissed\n/);
      const fresh = watch(restarted.url, room);
      const hello = await fresh.until(first("hello"));
      assert.match(pane(hello.recent), /^\$ echo kept\nkept\n\[exit 0\]\n\$ echo missed\nmissed\n\[exit 0\]\n$/);
      for (const w of [back, fresh]) w.close();
    } finally {
      await restarted.stop();
      await old.sandboxd.stop();
    }
  });
});

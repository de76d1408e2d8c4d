// Rooms that sleep and expire, on both sandbox paths: an idle sandbox is
// stopped with its files saved and woken by the next command; a room unused
// for ROOM_TTL_SECONDS is forgotten; a cold sandbox still answers in time.
// The two clocks are set to seconds here (SANDBOX_IDLE_SECONDS,
// ROOM_TTL_SECONDS); Durable Object alarms fire on workerd's real clock.
// The container path runs on the real Docker engine of ./support/engine.mjs,
// with the sandbox image under this suite's own tags: the image as built,
// and a variant whose sandboxd starts 8 s late (a slow machine's cold start).
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { after, before, describe, test } from "node:test";

import { SIDECAR_IMAGE, startEngine } from "./support/engine.mjs";
import { events, untilEvent } from "./support/lifecycle.mjs";
import { exec } from "./support/rooms.mjs";
import { startSandboxd, startWorker, tempDir } from "./support/stack.mjs";
import { sleep, until } from "./support/wait.mjs";

const IDLE_S = 2;
const TTL_S = 9;

describe("rooms that sleep and expire (SANDBOX_URL)", () => {
  let sandboxd, worker;
  const vars = () => ({ SANDBOX_URL: sandboxd.url, SANDBOX_IDLE_SECONDS: String(IDLE_S), ROOM_TTL_SECONDS: String(TTL_S) });
  before(async () => {
    sandboxd = await startSandboxd();
    worker = await startWorker({ vars: vars() });
  });
  after(async () => {
    await worker.stop();
    await sandboxd.stop();
  });
  const workspace = (room) => path.join(sandboxd.root, `sandbox-${room}`);

  test("an idle room sleeps with its files saved; the next command finds them in a fresh shell", async () => {
    const room = randomUUID();
    const made = await exec(worker, room, "mkdir -p d/e && printf 'hi\\n' > d/e/f && ln -s e/f d/link && chmod +x d/e/f && export V=1 && cd d");
    assert.equal(made.status, 200, made.text);
    await untilEvent(worker, room, "sleep");
    assert.ok(!fs.existsSync(workspace(room)), "the sandbox is stopped: its workspace is gone from sandboxd");
    const [slept] = events(worker, room);
    assert.ok(slept.bytes > 0 && Number.isInteger(slept.durationMs), JSON.stringify(slept));
    const woke = await exec(worker, room, 'cat d/link; test -x d/e/f && echo exec-bit; echo "V=$V"; pwd');
    assert.equal(woke.status, 200, woke.text);
    assert.equal(woke.json.result.stdout, `hi\nexec-bit\nV=\n${workspace(room)}\n`, "files back; directory and variables reset");
    const wake = events(worker, room).find((e) => e.event === "wake");
    assert.equal(wake.bytes, slept.bytes, JSON.stringify(wake));
  });

  test("a room used before its idle time keeps its shell", async () => {
    const room = randomUUID();
    await exec(worker, room, "export KEPT=yes; cd /tmp");
    for (let i = 0; i < 4; i++) {
      await sleep((IDLE_S * 1000) / 2);
      assert.equal((await exec(worker, room, "true")).status, 200);
    }
    const res = await exec(worker, room, 'echo "$KEPT $(pwd)"');
    assert.equal(res.json.result.stdout, "yes /tmp\n");
    assert.deepEqual(events(worker, room).map((e) => e.event), [], "it never slept");
  });

  test("a command running longer than the idle time is not cut off by a sleep; the room sleeps after it", async () => {
    const room = randomUUID();
    await exec(worker, room, "export KEPT=yes");
    // Started once the idle clock has almost run out, and running well past it.
    await sleep(IDLE_S * 1000 - 300);
    const res = await exec(worker, room, `sleep ${IDLE_S * 4}; echo "done $KEPT"`, { timeoutMs: 20_000 });
    assert.equal(res.status, 200, res.text);
    assert.equal(res.json.result.stdout, "done yes\n", "the command ran to its end in the room's shell");
    assert.deepEqual(events(worker, room).map((e) => e.event), [], "no sleep while it ran");
    await untilEvent(worker, room, "sleep");
  });

  test("an unused room expires: no history, no files; a used one does not", async () => {
    const [unused, used] = [randomUUID(), randomUUID()];
    for (const room of [unused, used]) {
      assert.equal((await worker.api("POST", `/api/rooms/${room}/message`, { text: "remember" })).status, 200);
      assert.equal((await exec(worker, room, "echo kept > f.txt")).status, 200);
    }
    // Keep one room in use, past the other's expiry.
    const deadline = Date.now() + (TTL_S + 2) * 1000;
    while (Date.now() < deadline) {
      await sleep(1500);
      await worker.api("GET", `/api/rooms/${used}/messages`);
      await exec(worker, used, "true");
    }
    await until("both objects to expire the unused room", () => {
      const expired = events(worker, unused).filter((e) => e.event === "expire").map((e) => e.object).sort();
      return expired.join() === "DuetAgent,Sandbox";
    });
    assert.deepEqual((await worker.api("GET", `/api/rooms/${unused}/messages`)).json.messages, []);
    assert.equal((await exec(worker, unused, "ls -A")).json.result.stdout, "", "no files");
    assert.equal((await worker.api("GET", `/api/rooms/${used}/messages`)).json.messages.length, 2);
    assert.equal((await exec(worker, used, "cat f.txt")).json.result.stdout, "kept\n");
    assert.ok(!events(worker, used).some((e) => e.event === "expire"));
  });

  test("a workspace over the archive cap: said in the log, the room stays usable", async () => {
    const small = await startWorker({ vars: { ...vars(), SANDBOX_ARCHIVE_MAX_BYTES: "4096" } });
    try {
      const room = randomUUID();
      await exec(small, room, "head -c 200000 /dev/urandom > big.bin");
      const slept = await untilEvent(small, room, "sleep");
      assert.match(slept.note, /over SANDBOX_ARCHIVE_MAX_BYTES \(4096 bytes\)/);
      assert.equal(slept.bytes, 0);
      const res = await exec(small, room, "ls -A; echo ok");
      assert.equal(res.status, 200, res.text);
      assert.equal(res.json.result.stdout, "ok\n");
    } finally {
      await small.stop();
    }
  });

  test("the worker and sandboxd restarted between sleep and wake lose nothing saved", async () => {
    const persistDir = tempDir("lifecycle-state");
    const first = await startWorker({ persistDir, vars: vars() });
    const room = randomUUID();
    try {
      await exec(first, room, "echo survived > s.txt");
      await untilEvent(first, room, "sleep");
      // The log line is no sign that the sleep's writes are on disk; an
      // answer of the same object is (its output waits for them), so the
      // worker is stopped only after one.
      assert.equal((await first.api("GET", `/api/rooms/${room}/jobs`)).status, 200);
    } finally {
      await first.stop();
    }
    await sandboxd.stop();
    sandboxd = await startSandboxd({ root: sandboxd.root, port: sandboxd.port });
    const second = await startWorker({ persistDir, vars: vars() });
    try {
      const res = await exec(second, room, "cat s.txt");
      assert.equal(res.status, 200, res.text);
      assert.equal(res.json.result.stdout, "survived\n", res.json.result.stderr);
    } finally {
      await second.stop();
    }
  });

  test("DELETE of a sleeping room forgets its saved files", async () => {
    const room = randomUUID();
    await exec(worker, room, "echo gone > g.txt");
    await untilEvent(worker, room, "sleep");
    assert.equal((await worker.api("DELETE", `/api/rooms/${room}`)).status, 200);
    const res = await exec(worker, room, "ls -A");
    assert.equal(res.json.result.stdout, "");
    assert.ok(!events(worker, room).some((e) => e.event === "wake"), "nothing to wake");
  });
});

describe("rooms that sleep, on the container path", () => {
  let engine, image, slow, cleanup, worker;
  before(async () => {
    engine = startEngine();
    image = await engine.imageFor("lifecycle");
    // The sandbox image on a slow machine: sandboxd starts 8 s late.
    slow = "duet-sandbox:lifecycle-slow";
    await engine.variant(slow, { delaySeconds: 8 });
    cleanup = await engine.follow(image, slow);
  });
  after(async () => {
    await worker?.stop();
    await cleanup?.removeAll();
    for (const tag of [image, slow]) await engine?.untag(tag).catch(() => {});
  });
  const running = async (of) => (await engine.containersOf(of)).filter((c) => c.status === "running");

  test("an idle room's container is removed, and the next command gets its files in a fresh one", async () => {
    worker = await startWorker({
      vars: { SANDBOX_IDLE_SECONDS: String(IDLE_S), ROOM_TTL_SECONDS: "3600" },
      container: { socketPath: engine.socketPath, imageName: image, egressImage: SIDECAR_IMAGE },
    });
    const room = randomUUID();
    assert.equal((await exec(worker, room, "echo contained > c.txt")).status, 200);
    const [first] = await running(image);
    assert.equal(await engine.readFile(first.id, room, "c.txt"), "contained\n");
    const since = engine.now();
    await untilEvent(worker, room, "sleep");
    assert.deepEqual(await engine.containersOf(image), [], "the container is gone from the engine");
    assert.ok((await engine.eventsOf(first.id, since)).some((e) => e.action === "destroy"), "removed through the Engine API");
    const res = await exec(worker, room, "cat c.txt");
    assert.equal(res.status, 200, res.text);
    assert.equal(res.json.result.stdout, "contained\n");
    const fresh = await running(image);
    assert.equal(fresh.length, 1, "one fresh container");
    assert.notEqual(fresh[0].id, first.id);
    await worker.stop();
    worker = undefined;
  });

  test("a cold exec with the largest timeoutMs answers a JSON result before 28 s", async () => {
    worker = await startWorker({ container: { socketPath: engine.socketPath, imageName: slow, egressImage: SIDECAR_IMAGE } });
    const started = Date.now();
    const res = await exec(worker, randomUUID(), "sleep 40", { timeoutMs: 25_000 });
    const ms = Date.now() - started;
    assert.ok(ms < 28_000, `answered after ${ms} ms`);
    assert.equal(res.status, 200, res.text);
    assert.equal(res.json.result.timedOut, true, "the command's limit was cut to what the start left");
    assert.ok(ms > 8_000, "the start really was slow");
    assert.equal((await running(slow)).length, 1, "on the engine's container of the slow image");
  });
});

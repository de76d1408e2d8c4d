// The Sandbox object's container path end to end: the worker on workerd with
// a container-enabled Sandbox object and no SANDBOX_URL, workerd's container
// client driving a real Docker engine (./support/engine.mjs), which runs the
// repository's image and our networking sidecar (sidecar/).
//
// What is asserted is what the worker promises: one container per room, that
// commands run in it and its state persists in its filesystem, that DELETE
// removes it from the engine, and how each failure of the container is
// answered (status, JSON error, time bound) and recovered from. What the
// worker did is read from the engine's own record: its containers' state,
// their files, and its event log. How workerd names containers, which
// Engine API calls it makes and in what order, and its sidecar are the
// runtime's business and are not pinned; a room's container is the one of
// the suite's image whose filesystem holds the room's workspace (sandboxd
// keeps it in `/workspace/sandbox-{roomId}`).
//
// The suite runs its own tag of the sandbox image (`imageFor`), which it
// swaps for a broken build and removes for a while; other suites on the
// same engine never see that. Its containers, and the sidecars workerd
// started beside them, are removed at the end.
//
// One fault a real engine cannot be made to show on demand is played by the
// Engine API stand-in of ./support/fake-docker.mjs, in the last describe.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { after, before, describe, test } from "node:test";

import { SIDECAR_IMAGE, WORKSPACES, startEngine } from "./support/engine.mjs";
import { startFakeDocker } from "./support/fake-docker.mjs";
import { startWorker } from "./support/stack.mjs";

// The worker's bounds (src/api/limits.rs).
const CONTAINER_START_MS = 10_000;
const SANDBOXD_MARGIN_MS = 2_000;
// Every request is bounded: a cold start may take CONTAINER_START_MS plus one
// health attempt and one pause (1 s each); nothing may take longer than this.
const REQUEST_LIMIT_MS = 15_000;
// The answer to a command that reached a container which had just died.
const UNREACHABLE = /^502 sandbox failed: cannot reach sandboxd: .+$/s;

const escape = (text) => text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
/** A command's answer as "status stdout" (200) or "status error", to compare with the outcomes a case allows. */
const answer = (res) => `${res.status} ${res.status === 200 ? res.json.result.stdout : (res.json?.error ?? res.text)}`;
const actions = (events) => events.map((e) => e.action);

/** The worker's routes used here, each request bounded: { status, json, text, ms }. */
function routes(url) {
  async function call(method, route, body) {
    const started = Date.now();
    const res = await fetch(url + route, {
      method,
      headers: body === undefined ? {} : { "content-type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(REQUEST_LIMIT_MS),
    });
    const text = await res.text();
    let json;
    try {
      json = JSON.parse(text);
    } catch {}
    return { status: res.status, text, json, ms: Date.now() - started };
  }
  const exec = (room, cmd, timeoutMs) => call("POST", `/api/rooms/${room}/sandbox/exec`, { cmd, timeoutMs });
  return { call, exec };
}

describe("the Sandbox object's container, on a Docker engine", () => {
  let engine, image, imageId, worker, call, exec, cleanup;
  // A build of the image whose sandboxd never answers: nothing listens.
  let silent;
  before(async () => {
    engine = startEngine();
    image = await engine.imageFor("container");
    imageId = (await engine.inspectImage(image)).id;
    cleanup = await engine.follow(image);
    worker = await startWorker({ container: { socketPath: engine.socketPath, imageName: image, egressImage: SIDECAR_IMAGE } });
    ({ call, exec } = routes(worker.url));
  });
  after(async () => {
    await worker?.stop();
    await cleanup?.removeAll();
    for (const tag of [image, silent]) if (tag) await engine.untag(tag).catch(() => {});
  });

  /** The containers of the suite's image that hold the room's workspace. */
  const containersOfRoom = (room) => engine.containersOfRoom(image, room);
  /** The room's one container. */
  async function containerOf(room) {
    const found = await containersOfRoom(room);
    assert.equal(found.length, 1, `one container holds room ${room}: ${found.map((c) => `${c.id} (${c.status})`)}`);
    return found[0];
  }
  /** The ids of the containers of the suite's image now. */
  const ids = async () => new Set((await engine.containersOf(image)).map((c) => c.id));
  /** The containers of the suite's image not in `before` (a set of ids). */
  const createdSince = async (before) => (await engine.containersOf(image)).filter((c) => !before.has(c.id));
  /** Runs a first command in a new room; answers the room's (new) container and when the command was sent. */
  async function openRoom(cmd = "true") {
    const room = randomUUID();
    const existing = await ids();
    const since = engine.now();
    const res = await exec(room, cmd);
    assert.equal(res.status, 200, res.text);
    const container = await containerOf(room);
    assert.equal(existing.has(container.id), false, "a new container");
    return { room, container, since, first: res };
  }

  test("the first exec creates and starts the room's container; state persists; later execs reuse it", async () => {
    const existing = await ids();
    const { room, container, since, first } = await openRoom("echo hi");
    assert.equal(first.json.result.stdout, "hi\n");
    assert.equal(first.json.sandboxName, `sandbox-${room}`);
    // One container of the image, created and started once.
    assert.deepEqual((await createdSince(existing)).map((c) => c.id), [container.id], "one container of the image created");
    assert.deepEqual(actions(await engine.eventsOf(container.id, since)), ["create", "start"]);
    assert.equal(container.imageId, imageId);
    assert.equal(container.status, "running");

    // Files, working directory and environment persist, in the container's own filesystem.
    assert.equal((await exec(room, "mkdir -p sub && cd sub && export GREETING=hola && echo data > f.txt")).status, 200);
    const again = engine.now();
    const res = await exec(room, 'pwd; echo "$GREETING"; cat f.txt');
    assert.equal(res.status, 200, res.text);
    assert.equal(res.json.result.stdout, `${WORKSPACES}/sandbox-${room}/sub\nhola\ndata\n`);
    assert.equal(await engine.readFile(container.id, room, "sub/f.txt"), "data\n");
    // The same container and process throughout: neither created, started,
    // stopped nor restarted again.
    const now = await containerOf(room);
    assert.deepEqual([now.id, now.status, now.pid, now.startedAt, now.restarts], [container.id, "running", container.pid, container.startedAt, 0]);
    assert.deepEqual(await engine.eventsOf(container.id, again), []);
  });

  test("two rooms get two containers: separate filesystems", async () => {
    const a = await openRoom("echo secret > mine.txt && mkdir deep && cd deep");
    const b = await openRoom("ls -a; pwd");
    assert.notEqual(a.container.id, b.container.id);
    assert.deepEqual([a.container.status, b.container.status], ["running", "running"]);
    assert.equal(b.first.json.result.stdout.includes("mine.txt"), false);
    assert.equal((await exec(b.room, "cat mine.txt")).json.result.success, false);
    assert.equal(await engine.readFile(a.container.id, a.room, "mine.txt"), "secret\n");
    assert.equal(await engine.exists(b.container.id, `${WORKSPACES}/sandbox-${a.room}`), false, "a's workspace is not in b's filesystem");
    assert.match((await exec(a.room, "pwd")).json.result.stdout, /deep\n$/);
  });

  test("concurrent first commands in a new room share one container", async () => {
    const room = randomUUID();
    const since = engine.now();
    const answers = await Promise.all(["a", "b", "c"].map((x) => exec(room, `echo ${x}`)));
    assert.deepEqual(answers.map(answer), ["200 a\n", "200 b\n", "200 c\n"]);
    assert.deepEqual(actions(await engine.eventsOf((await containerOf(room)).id, since)), ["create", "start"]);
  });

  test("<run> tags from /message run in the room's container", async () => {
    const { room, container } = await openRoom();
    const res = await call("POST", `/api/rooms/${room}/message`, { text: "raw <run>echo hi</run><run>touch made-by-run</run>" });
    assert.equal(res.status, 200, res.text);
    assert.match(res.json.reply, /Output \(echo hi\):\nhi(\n|$)/);
    assert.equal(await engine.readFile(container.id, room, "made-by-run"), "", "the file is in the container's filesystem");
  });

  test("DELETE /api/rooms/{id} removes the container from the engine; the next exec gets a fresh one", async () => {
    const { room, container, since } = await openRoom("echo keep > kept.txt");
    const res = await call("DELETE", `/api/rooms/${room}`);
    assert.equal(res.status, 200, res.text);
    assert.deepEqual(res.json, { cleaned: true, roomId: room });
    assert.equal(await engine.inspect(container.id), undefined, "the container, and its filesystem with it, is removed from the engine");
    assert.equal(actions(await engine.eventsOf(container.id, since)).at(-1), "destroy");
    assert.deepEqual(await containersOfRoom(room), [], "nothing of the room is left in the engine");

    const next = await exec(room, "ls -A; echo fresh");
    assert.equal(next.status, 200, `the room works again: ${next.text} after ${next.ms} ms`);
    assert.equal(next.json.result.stdout, "fresh\n", "an empty workspace");
    const fresh = await containerOf(room);
    assert.notEqual(fresh.id, container.id, "a fresh container");
    assert.equal(fresh.status, "running");
  });

  test("DELETE /api/rooms/{id} after the container stopped: the stopped container and the room's files go too", async () => {
    const left = [];
    for (const signal of ["SIGTERM", "SIGKILL"]) {
      // SIGTERM: sandboxd ends cleanly and stays down. SIGKILL: it fails
      // and the engine restarts it under the restart policy workerd asks for.
      const { room, container } = await openRoom("echo secret > f.txt");
      await engine.crash(container.id, signal);
      const res = await call("DELETE", `/api/rooms/${room}`);
      assert.equal(res.status, 200, res.text);
      for (const c of await containersOfRoom(room)) left.push(`${signal}: ${c.id} (${c.status}) still holds the room's files`);
      if (await engine.inspect(container.id)) left.push(`${signal}: the container is still in the engine`);
    }
    assert.deepEqual(left, []);
  });

  test("a container killed from outside (the engine restarts it): no hang, the room works by the following command", async () => {
    const { room, container } = await openRoom("cd /tmp && export LOST=1");
    assert.equal(await engine.crash(container.id, "SIGKILL"), 137);
    // The engine has reported the exit before the command is sent: the
    // command runs in a fresh shell or, at most this once, is answered with
    // the JSON 502 of a container that cannot be reached.
    const next = await exec(room, 'echo "after:$LOST"');
    assert.match(answer(next), new RegExp(`^200 ${escape("after:\n")}$|${UNREACHABLE.source}`, "s"));
    const following = await exec(room, "echo ok");
    assert.equal(answer(following), "200 ok\n", `after ${following.ms} ms`);
    assert.equal((await containerOf(room)).status, "running", "one container of the room, running");
  });

  test("a container that exits and stays down: a clean error at most once, then the room works again", async () => {
    const { room, container } = await openRoom("echo before > f.txt");
    // tini hands SIGTERM to sandboxd, which ends cleanly (exit 0): no
    // restart policy applies, it stays exited.
    assert.equal(await engine.crash(container.id, "SIGTERM"), 0);
    assert.equal((await engine.inspect(container.id)).status, "exited");
    const next = await exec(room, "echo one");
    assert.match(answer(next), new RegExp(`^200 one\n$|${UNREACHABLE.source}`, "s"));
    const following = await exec(room, "echo two");
    assert.equal(answer(following), "200 two\n", `the room works again after ${following.ms} ms`);
    assert.equal((await containerOf(room)).status, "running");
  });

  test("a frozen container (docker pause): a JSON 504 within the command's limit, then the same container carries on", async () => {
    const { room, container } = await openRoom("export KEPT=1");
    const since = engine.now();
    await engine.pause(container.id);
    let res;
    try {
      res = await exec(room, 'echo "kept:$KEPT"', 1_000);
    } finally {
      await engine.unpause(container.id);
    }
    assert.equal(answer(res), `504 sandbox did not answer within ${1_000 + SANDBOXD_MARGIN_MS} ms`);
    assert.ok(res.ms >= 1_000 + SANDBOXD_MARGIN_MS - 500, `${res.ms} ms`);
    // Not taken for dead: the same container and shell answer the next command.
    const next = await exec(room, 'echo "kept:$KEPT"');
    assert.equal(answer(next), "200 kept:1\n");
    assert.deepEqual(actions(await engine.eventsOf(container.id, since)), ["pause", "unpause"], "neither stopped nor restarted");
  });

  test("a container whose sandboxd never answers: a JSON 503 naming the container start, bounded; it is removed", async () => {
    const room = randomUUID();
    silent = `${image}-silent`;
    engine.build(silent, `FROM ${image}\nENTRYPOINT ["sleep", "infinity"]\n`);
    const existing = await ids();
    await engine.tag(silent, image); // a broken build pushed under the same tag
    let res;
    try {
      res = await exec(room, "echo hi");
    } finally {
      await engine.tag(imageId, image);
    }
    assert.equal(answer(res), `503 sandbox unavailable: the container did not answer within ${CONTAINER_START_MS} ms`);
    assert.ok(res.ms >= CONTAINER_START_MS - 1_000, `${res.ms} ms`);
    assert.deepEqual(await createdSince(existing), [], "the container that never answered is removed from the engine");
    // With the image fixed the room gets a fresh container.
    const next = await exec(room, "echo hi");
    assert.equal(answer(next), "200 hi\n");
    assert.equal((await containerOf(room)).imageId, imageId);
  });

  test("an image the engine does not have: a JSON 503 at once, and the room works once it is there", async () => {
    const room = randomUUID();
    const existing = await ids();
    await engine.untag(image); // `docker rmi`
    let res;
    try {
      res = await exec(room, "echo hi");
    } finally {
      await engine.tag(imageId, image); // `docker pull`
    }
    assert.equal(res.status, 503, res.text);
    assert.match(res.json.error, /^sandbox unavailable: /);
    assert.ok(res.ms < CONTAINER_START_MS, `${res.ms} ms: not the whole start window`);
    assert.deepEqual(await createdSince(existing), [], "no container was created");
    const next = await exec(room, "echo hi");
    assert.equal(answer(next), "200 hi\n");
  });
});

// Faults a real engine cannot be made to show on demand, played by the
// Engine API stand-in, whose containers run the real sandboxd as local
// processes.
describe("the Sandbox object's container, on the Engine API stand-in", () => {
  const IMAGE = "duet-sandbox:test";
  let docker, worker, exec;
  before(async () => {
    docker = await startFakeDocker({ images: { [IMAGE]: "sandboxd" } });
    worker = await startWorker({ container: { socketPath: docker.socketPath, imageName: IMAGE, egressImage: docker.egressImage } });
    ({ exec } = routes(worker.url));
  });
  after(async () => {
    await worker?.stop();
    await docker?.close();
  });

  // Needs the stand-in: a real engine learns of its first process's death at
  // once (containerd reports the exit), so the window between sandboxd dying
  // and the engine saying so cannot be held open for a command to fall in.
  test("sandboxd dies before the engine notices: one JSON 502, then the room works again", async () => {
    const room = randomUUID();
    assert.equal((await exec(room, "export KEPT=1")).status, 200);
    const [container] = docker.containersOf(IMAGE).filter((c) => c.root !== null && fs.existsSync(path.join(c.root, `sandbox-${room}`)));
    await docker.crash(container.name, "SIGTERM", { unnoticed: true });
    // workerd still takes it for running: the request fails to connect.
    const next = await exec(room, 'echo "kept:$KEPT"');
    assert.match(answer(next), UNREACHABLE);
    assert.equal(await docker.noticeExit(container.name), 0);
    const following = await exec(room, 'echo "kept:$KEPT"');
    assert.equal(answer(following), "200 kept:\n", "a fresh shell");
  });
});

// The Sandbox object's container path end to end: the worker on workerd with
// a container-enabled Sandbox object and no SANDBOX_URL, workerd's container
// client driving the Docker Engine API stand-in of ./support/fake-docker.mjs,
// whose containers run the real sandboxd.
//
// What is asserted is what the worker promises: one container per room, that
// commands run in it and its state persists, that DELETE removes it from the
// engine, and how each failure of the container is answered (status, JSON
// error, time bound) and recovered from. How workerd names containers, which
// Engine API calls it makes and in what order, and its networking sidecar
// are the runtime's business and are not pinned; a room's container is the
// one of the Sandbox image whose filesystem holds the room's workspace
// (sandboxd keeps it in `sandbox-{roomId}` under its root).
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { after, before, describe, test } from "node:test";

import { startFakeDocker } from "./support/fake-docker.mjs";
import { startWorker } from "./support/stack.mjs";

const IMAGE = "duet-sandbox:test";
// The worker's bounds (src/api/limits.rs).
const CONTAINER_START_MS = 10_000;
const SANDBOXD_MARGIN_MS = 2_000;
// Every request is bounded: a cold start may take CONTAINER_START_MS plus one
// health attempt and one pause (1 s each); nothing may take longer than this.
const REQUEST_LIMIT_MS = 15_000;
// The answer to a command that reached a container which had just died.
const UNREACHABLE = /^502 sandbox failed: cannot reach sandboxd: .+$/s;

const alive = (pid) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};
const escape = (text) => text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
/** A command's answer as "status stdout" (200) or "status error", to compare with the outcomes a case allows. */
const answer = (res) => `${res.status} ${res.status === 200 ? res.json.result.stdout : (res.json?.error ?? res.text)}`;

describe("the Sandbox object's container, through the Docker Engine API", () => {
  let docker, worker;
  before(async () => {
    docker = await startFakeDocker({ images: { [IMAGE]: "sandboxd" } });
    worker = await startWorker({ container: { socketPath: docker.socketPath, imageName: IMAGE, egressImage: docker.egressImage } });
  });
  after(async () => {
    await worker?.stop();
    await docker?.close();
  });

  /** A bounded request: { status, json, text, ms }; throws if it takes longer than REQUEST_LIMIT_MS. */
  async function call(method, route, body) {
    const started = Date.now();
    const res = await fetch(worker.url + route, {
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
  const holds = (c, room) => c.root !== null && fs.existsSync(path.join(c.root, `sandbox-${room}`));
  /** The containers of the Sandbox image that hold the room's workspace. */
  const containersOfRoom = (room) => docker.containersOf(IMAGE).filter((c) => holds(c, room));
  /** The room's one container. */
  function containerOf(room) {
    const found = containersOfRoom(room);
    assert.equal(found.length, 1, `one container holds room ${room}: ${found.map((c) => `${c.id} (${c.status})`)}`);
    return found[0];
  }
  /** Runs a first command in a new room; answers the room's (new) container. */
  async function openRoom(cmd = "true") {
    const room = randomUUID();
    const existing = new Set(docker.containersOf(IMAGE).map((c) => c.id));
    const res = await exec(room, cmd);
    assert.equal(res.status, 200, res.text);
    const container = containerOf(room);
    assert.equal(existing.has(container.id), false, "a new container");
    return { room, container, first: res };
  }
  /**
   * Engine calls since index `since` that create a container of `c`'s image,
   * or start, stop, kill, pause or remove `c` (inspecting and waiting do not count).
   */
  const lifecycleOf = (c, since) =>
    docker.calls
      .slice(since)
      .map((k) => ({ ...k, route: k.path.replace(/^\/v\d+\.\d+(?=\/)/, "") }))
      .filter((k) => k.method !== "GET" && !/^\/containers\/[^/?]+\/wait([?]|$)/.test(k.route))
      .filter((k) => k.image === c.image || [c.name, c.id].some((ref) => new RegExp(`^/containers/${escape(encodeURIComponent(ref))}([/?]|$)`).test(k.route)))
      .map((k) => `${k.method} ${k.path} -> ${k.status}`);

  test("the first exec creates and starts the room's container; state persists; later execs reuse it", async () => {
    const since = docker.calls.length;
    const { room, container, first } = await openRoom("echo hi");
    assert.equal(first.json.result.stdout, "hi\n");
    assert.equal(first.json.sandboxName, `sandbox-${room}`);
    // One container of the Sandbox image, created and started once, running sandboxd.
    assert.deepEqual(
      docker.calls.slice(since).filter((k) => k.image === IMAGE).map((k) => k.status),
      [201],
      "one container of the image created",
    );
    assert.equal(container.image, IMAGE);
    assert.equal(container.status, "running");
    assert.equal(container.runs, 1, "started once");
    assert.ok(alive(container.pid), "its sandboxd runs");

    // Files, working directory and environment persist, in the container's own root.
    assert.equal((await exec(room, "mkdir -p sub && cd sub && export GREETING=hola && echo data > f.txt")).status, 200);
    const again = docker.calls.length;
    const res = await exec(room, 'pwd; echo "$GREETING"; cat f.txt');
    assert.equal(res.status, 200, res.text);
    assert.equal(res.json.result.stdout, `${path.join(fs.realpathSync(container.root), `sandbox-${room}`, "sub")}\nhola\ndata\n`);
    assert.equal(fs.readFileSync(path.join(container.root, `sandbox-${room}`, "sub", "f.txt"), "utf8"), "data\n");
    // The same container and process throughout: neither created, started,
    // stopped nor restarted again.
    assert.equal(containerOf(room), container);
    assert.equal(container.runs, 1);
    assert.ok(alive(container.pid));
    assert.deepEqual(lifecycleOf(container, again), []);
  });

  test("two rooms get two containers: two sandboxd processes, separate filesystems", async () => {
    const a = await openRoom("echo secret > mine.txt && mkdir deep && cd deep");
    const b = await openRoom("ls -a; pwd");
    assert.notEqual(a.container.id, b.container.id);
    assert.notEqual(a.container.pid, b.container.pid);
    assert.ok(alive(a.container.pid) && alive(b.container.pid));
    assert.notEqual(a.container.root, b.container.root);
    assert.equal(b.first.json.result.stdout.includes("mine.txt"), false);
    assert.equal((await exec(b.room, "cat mine.txt")).json.result.success, false);
    assert.equal(fs.existsSync(path.join(a.container.root, `sandbox-${a.room}`, "mine.txt")), true);
    assert.deepEqual(fs.readdirSync(b.container.root), [`sandbox-${b.room}`]);
    assert.match((await exec(a.room, "pwd")).json.result.stdout, /deep\n$/);
  });

  test("concurrent first commands in a new room share one container", async () => {
    const room = randomUUID();
    const answers = await Promise.all(["a", "b", "c"].map((x) => exec(room, `echo ${x}`)));
    assert.deepEqual(answers.map(answer), ["200 a\n", "200 b\n", "200 c\n"]);
    assert.equal(containerOf(room).runs, 1);
  });

  test("<run> tags from /message run in the room's container", async () => {
    const { room, container } = await openRoom();
    const res = await call("POST", `/api/rooms/${room}/message`, { text: "raw <run>echo hi</run><run>touch made-by-run</run>" });
    assert.equal(res.status, 200, res.text);
    assert.match(res.json.reply, /Output \(echo hi\):\nhi(\n|$)/);
    assert.ok(fs.existsSync(path.join(container.root, `sandbox-${room}`, "made-by-run")), "the file is in the container's filesystem");
  });

  test("DELETE /api/rooms/{id} removes the container from the engine; the next exec gets a fresh one", async () => {
    const { room, container } = await openRoom("echo keep > kept.txt");
    const { id, pid, root } = container;
    const res = await call("DELETE", `/api/rooms/${room}`);
    assert.equal(res.status, 200, res.text);
    assert.deepEqual(res.json, { cleaned: true, roomId: room });
    assert.equal(docker.container(id), undefined, "the container is removed from the engine");
    assert.equal(alive(pid), false, "its sandboxd is gone");
    assert.equal(fs.existsSync(root), false, "its filesystem is gone");
    assert.deepEqual(containersOfRoom(room), [], "nothing of the room is left in the engine");

    const next = await exec(room, "ls -A; echo fresh");
    assert.equal(next.status, 200, `the room works again: ${next.text} after ${next.ms} ms`);
    assert.equal(next.json.result.stdout, "fresh\n", "an empty workspace");
    const fresh = containerOf(room);
    assert.notEqual(fresh.id, id, "a fresh container");
    assert.equal(fresh.status, "running");
  });

  test(
    "DELETE /api/rooms/{id} after the container stopped: the stopped container and the room's files go too",
    async () => {
      const left = [];
      for (const signal of ["SIGTERM", "SIGKILL"]) {
        // SIGTERM: sandboxd ends cleanly and stays down. SIGKILL: it fails
        // and the engine restarts it under the restart policy workerd asks for.
        const { room, container } = await openRoom("echo secret > f.txt");
        await docker.crash(container.name, signal);
        const res = await call("DELETE", `/api/rooms/${room}`);
        assert.equal(res.status, 200, res.text);
        for (const c of containersOfRoom(room)) left.push(`${signal}: ${c.id} (${c.status}) still holds ${path.join(c.root, `sandbox-${room}`, "f.txt")}`);
      }
      assert.deepEqual(left, []);
    },
  );

  test("a container killed from outside (the engine restarts it): no hang, the room works by the following command", async () => {
    const { room, container } = await openRoom("cd /tmp && export LOST=1");
    assert.equal(await docker.crash(container.name, "SIGKILL"), 137);
    // The engine has reported the exit before the command is sent: the
    // command runs in a fresh shell or, at most this once, is answered with
    // the JSON 502 of a container that cannot be reached.
    const next = await exec(room, 'echo "after:$LOST"');
    assert.match(answer(next), new RegExp(`^200 ${escape("after:\n")}$|${UNREACHABLE.source}`, "s"));
    const following = await exec(room, "echo ok");
    assert.equal(answer(following), "200 ok\n", `after ${following.ms} ms`);
    assert.equal(containerOf(room).status, "running", "one container of the room, running");
  });

  test("a container that exits and stays down: a clean error at most once, then the room works again", async () => {
    const { room, container } = await openRoom("echo before > f.txt");
    // sandboxd ends cleanly (exit 0): no restart policy applies, it stays exited.
    assert.equal(await docker.crash(container.name, "SIGTERM"), 0);
    assert.equal(container.status, "exited");
    const next = await exec(room, "echo one");
    assert.match(answer(next), new RegExp(`^200 one\n$|${UNREACHABLE.source}`, "s"));
    const following = await exec(room, "echo two");
    assert.equal(answer(following), "200 two\n", `the room works again after ${following.ms} ms`);
    assert.equal(containerOf(room).status, "running");
  });

  test("sandboxd dies before the engine notices: one JSON 502, then the room works again", async () => {
    const { room, container } = await openRoom("export KEPT=1");
    await docker.crash(container.name, "SIGTERM", { unnoticed: true });
    // workerd still takes it for running: the request fails to connect.
    const next = await exec(room, 'echo "kept:$KEPT"');
    assert.match(answer(next), UNREACHABLE);
    assert.equal(await docker.noticeExit(container.name), 0);
    const following = await exec(room, 'echo "kept:$KEPT"');
    assert.equal(answer(following), "200 kept:\n", "a fresh shell");
  });

  test("a frozen container (docker pause): a JSON 504 within the command's limit, then the same container carries on", async () => {
    const { room, container } = await openRoom("export KEPT=1");
    docker.pause(container.name);
    let res;
    try {
      res = await exec(room, 'echo "kept:$KEPT"', 1_000);
    } finally {
      docker.unpause(container.name);
    }
    assert.equal(answer(res), `504 sandbox did not answer within ${1_000 + SANDBOXD_MARGIN_MS} ms`);
    assert.ok(res.ms >= 1_000 + SANDBOXD_MARGIN_MS - 500, `${res.ms} ms`);
    // Not taken for dead: the same container and shell answer the next command.
    const next = await exec(room, 'echo "kept:$KEPT"');
    assert.equal(answer(next), "200 kept:1\n");
    assert.equal(containerOf(room), container);
    assert.equal(container.runs, 1);
  });

  test("a container whose sandboxd never answers: a JSON 503 naming the container start, bounded; it is removed", async () => {
    const room = randomUUID();
    docker.setImage(IMAGE, "silent"); // a broken build pushed under the same tag
    let res;
    try {
      res = await exec(room, "echo hi");
    } finally {
      docker.setImage(IMAGE, "sandboxd");
    }
    assert.equal(answer(res), `503 sandbox unavailable: the container did not answer within ${CONTAINER_START_MS} ms`);
    assert.ok(res.ms >= CONTAINER_START_MS - 1_000, `${res.ms} ms`);
    assert.deepEqual(
      docker.containersOf(IMAGE).filter((c) => c.kind === "silent"),
      [],
      "the container that never answered is removed from the engine",
    );
    // With the image fixed the room gets a fresh container.
    const next = await exec(room, "echo hi");
    assert.equal(answer(next), "200 hi\n");
    assert.equal(containerOf(room).kind, "sandboxd");
  });

  test("an image the engine does not have: a JSON 503 at once, and the room works once it is there", async () => {
    const room = randomUUID();
    const since = docker.calls.length;
    docker.setImage(IMAGE, null); // `docker rmi`
    let res;
    try {
      res = await exec(room, "echo hi");
    } finally {
      docker.setImage(IMAGE, "sandboxd"); // `docker pull`
    }
    assert.equal(res.status, 503, res.text);
    assert.match(res.json.error, /^sandbox unavailable: /);
    assert.ok(res.ms < CONTAINER_START_MS, `${res.ms} ms: not the whole start window`);
    assert.deepEqual(
      docker.calls.slice(since).filter((k) => k.image === IMAGE && k.status === 201),
      [],
      "no container was created",
    );
    const next = await exec(room, "echo hi");
    assert.equal(answer(next), "200 hi\n");
  });

  test("nothing outside the Engine API was asked for, and the engine never failed", () => {
    assert.deepEqual(docker.unknown, []);
    assert.deepEqual(
      docker.calls.filter((k) => k.status >= 500).map((k) => `${k.method} ${k.path} -> ${k.status}`),
      [],
    );
  });
});

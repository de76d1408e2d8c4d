// The Sandbox object's container path end to end: the worker on workerd with
// a container-enabled Sandbox object and no SANDBOX_URL, workerd's container
// client driving the Docker Engine API stand-in of ./support/fake-docker.mjs,
// whose containers run the real sandboxd.
//
// workerd gives each Sandbox object two "containers": a networking sidecar
// (`<name>-proxy`, the egress interceptor image) that owns the network
// namespace, and the sandbox container itself, which joins it; requests to
// port 8080 are tunnelled through the sidecar. Both are asserted below.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { after, before, describe, test } from "node:test";

import { startFakeDocker } from "./support/fake-docker.mjs";
import { startWorker } from "./support/stack.mjs";

const IMAGE = "duet-sandbox:test";
// Every request is bounded: a cold start may take CONTAINER_START_MS (10 s)
// plus one health attempt (1 s); nothing may take longer than this.
const REQUEST_LIMIT_MS = 15_000;

const alive = (pid) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

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
  const exec = (room, cmd) => call("POST", `/api/rooms/${room}/sandbox/exec`, { cmd });
  const names = () => new Set(docker.containersOf(IMAGE).map((c) => c.name));
  /** Runs a first command in a new room; answers the room's container. */
  async function openRoom(cmd = "true") {
    const room = randomUUID();
    const before = names();
    const res = await exec(room, cmd);
    assert.equal(res.status, 200, res.text);
    const fresh = [...names()].filter((n) => !before.has(n));
    assert.equal(fresh.length, 1, `one new container for room ${room}: ${fresh}`);
    return { room, name: fresh[0], container: docker.container(fresh[0]), first: res };
  }
  /** Docker calls about container `name` or its sidecar, since call index `since`. */
  const callsAbout = (name, since = 0) =>
    docker
      .log(since)
      .filter((c) => c.includes(`/${name}`) || c.includes(`=${name}`))
      .map((c) => c.replaceAll(name, "N"));

  test("the first exec creates and starts the room's container; state persists; later execs reuse it", async () => {
    const since = docker.calls.length;
    const { room, name, container, first } = await openRoom("echo hi");
    assert.equal(first.json.result.stdout, "hi\n");
    assert.equal(first.json.sandboxName, `sandbox-${room}`);
    assert.match(name, /^workerd-duet-Sandbox-[0-9a-f]{64}$/);
    const started = callsAbout(name, since);
    // What workerd asked for, in order (the sidecar first: it owns the network).
    const expected = [
      "GET /containers/N/json", // the object's constructor: not there yet (404)
      "DELETE /containers/N-proxy?force=true",
      "POST /containers/create?name=N-proxy",
      "POST /containers/N-proxy/start",
      "GET /containers/N-proxy/json",
      "POST /containers/create?name=N",
      "POST /containers/N/start",
    ];
    assert.deepEqual(started.filter((c) => expected.includes(c)), expected);
    assert.deepEqual(
      docker.calls.slice(since).filter((c) => c.path.startsWith(`/containers/${name}/json`)).map((c) => c.status),
      [404],
    );
    assert.equal(container.status, "running");
    assert.equal(container.config.Image, IMAGE);
    assert.equal(container.hostConfig.NetworkMode, `container:${name}-proxy`);
    assert.ok(alive(container.pid), "its sandboxd runs");
    assert.deepEqual(docker.container(`${name}-proxy`).proxyCalls.filter((c) => c.startsWith("CONNECT")).at(-1), "CONNECT 127.0.0.1:8080");

    // Files, working directory and environment persist, in the container's own root.
    assert.equal((await exec(room, "mkdir -p sub && cd sub && export GREETING=hola && echo data > f.txt")).status, 200);
    const again = docker.calls.length;
    const res = await exec(room, 'pwd; echo "$GREETING"; cat f.txt');
    assert.equal(res.status, 200, res.text);
    assert.equal(res.json.result.stdout, `${path.join(fs.realpathSync(container.root), `sandbox-${room}`, "sub")}\nhola\ndata\n`);
    assert.equal(fs.readFileSync(path.join(container.root, `sandbox-${room}`, "sub", "f.txt"), "utf8"), "data\n");
    // Neither created nor started again; no Docker call at all while it is up.
    assert.deepEqual(callsAbout(name, again), []);
    assert.deepEqual(docker.unknown, [], "no request outside the Engine API");
  });

  test("two rooms get two containers: two sandboxd processes, separate filesystems", async () => {
    const a = await openRoom("echo secret > mine.txt && mkdir deep && cd deep");
    const b = await openRoom("ls -a; pwd");
    assert.notEqual(a.name, b.name);
    assert.notEqual(a.container.pid, b.container.pid);
    assert.ok(alive(a.container.pid) && alive(b.container.pid));
    assert.notEqual(a.container.root, b.container.root);
    assert.equal(b.first.json.result.stdout.includes("mine.txt"), false);
    assert.equal((await exec(b.room, "cat mine.txt")).json.result.success, false);
    assert.equal(fs.existsSync(path.join(a.container.root, `sandbox-${a.room}`, "mine.txt")), true);
    assert.deepEqual(fs.readdirSync(b.container.root), [`sandbox-${b.room}`]);
    assert.match((await exec(a.room, "pwd")).json.result.stdout, /deep\n$/);
  });

  test("<run> tags from /message run in the room's container", async () => {
    const { room, container } = await openRoom();
    const res = await call("POST", `/api/rooms/${room}/message`, { text: "raw <run>echo hi</run><run>touch made-by-run</run>" });
    assert.equal(res.status, 200, res.text);
    assert.match(res.json.reply, /Output \(echo hi\):\nhi(\n|$)/);
    assert.ok(fs.existsSync(path.join(container.root, `sandbox-${room}`, "made-by-run")), "the file is in the container's filesystem");
  });

  test("DELETE /api/rooms/{id} destroys the container; the next exec gets a fresh one", async () => {
    const { room, name, container } = await openRoom("echo keep > kept.txt");
    const { pid, root } = container;
    const since = docker.calls.length;
    const res = await call("DELETE", `/api/rooms/${room}`);
    assert.equal(res.status, 200, res.text);
    assert.deepEqual(res.json, { cleaned: true, roomId: room });
    const calls = callsAbout(name, since);
    for (const c of ["DELETE /containers/N?force=true", "DELETE /containers/N-proxy?force=true"]) assert.ok(calls.includes(c), `${c} in ${calls}`);
    assert.equal(docker.container(name), undefined, "the container is removed");
    assert.equal(docker.container(`${name}-proxy`), undefined, "its sidecar is removed");
    assert.equal(alive(pid), false, "its sandboxd is gone");
    assert.equal(fs.existsSync(root), false, "its filesystem is gone");

    const next = await exec(room, "ls -A; echo fresh");
    assert.equal(next.status, 200, `the room works again: ${next.status} ${next.text} after ${next.ms} ms`);
    assert.equal(next.json.result.stdout, "fresh\n", "an empty workspace");
    const fresh = docker.container(name);
    assert.ok(fresh && fresh.status === "running" && fresh.root !== root, "a fresh container under the same name");
  });

  test("a container killed from outside (Docker restarts it): no hang, the room works by the following command", async () => {
    const { room, name, container } = await openRoom("cd /tmp && export LOST=1");
    assert.equal(await docker.crash(name, "SIGKILL"), 137);
    // As Docker does with the on-failure policy workerd asks for.
    assert.equal(container.hostConfig.RestartPolicy?.Name, "on-failure");
    const next = await exec(room, 'echo "after:$LOST"');
    assert.ok(next.status === 200 || (next.status >= 500 && typeof next.json?.error === "string"), `clean answer: ${next.status} ${next.text}`);
    const following = await exec(room, "echo ok");
    assert.equal(following.status, 200, `${following.status} ${following.text} after ${following.ms} ms`);
    assert.equal(following.json.result.stdout, "ok\n");
    if (next.status === 200) assert.equal(next.json.result.stdout, "after:\n", "a new shell: the old one's state is gone");
  });

  test("a container that exits and stays down: a clean error at most once, then the room works again", async () => {
    const { room, name } = await openRoom("echo before > f.txt");
    // sandboxd ends cleanly (exit 0): no restart policy applies, it stays exited.
    assert.equal(await docker.crash(name, "SIGTERM"), 0);
    assert.equal(docker.container(name).status, "exited");
    const next = await exec(room, "echo one");
    assert.ok(next.status === 200 || (next.status >= 500 && typeof next.json?.error === "string"), `clean answer: ${next.status} ${next.text}`);
    const following = next.status === 200 ? next : await exec(room, "echo one");
    assert.equal(following.status, 200, `the room works again: ${following.status} ${following.text} after ${following.ms} ms`);
    assert.equal(docker.container(name).status, "running");
  });

  test("a container whose sandboxd never answers: a JSON 503 naming the container start, not a hang", async () => {
    docker.setImage(IMAGE, "silent"); // a broken build pushed under the same tag
    try {
      const room = randomUUID();
      const res = await exec(room, "echo hi");
      assert.equal(res.status, 503, res.text);
      assert.match(res.json.error, /container did not answer within 10000 ms/);
      assert.ok(res.ms >= 9_000 && res.ms < 13_000, `${res.ms} ms`);
    } finally {
      docker.setImage(IMAGE, "sandboxd");
    }
  });

  test("an image the engine does not have: a JSON 503, not a hang", async () => {
    docker.setImage(IMAGE, null); // `docker rmi`
    try {
      const since = docker.calls.length;
      const res = await exec(randomUUID(), "echo hi");
      assert.equal(res.status, 503, res.text);
      assert.equal(typeof res.json.error, "string");
      const create = docker.calls.slice(since).find((c) => /^\/containers\/create\?name=workerd-duet-Sandbox-[0-9a-f]{64}$/.test(c.path));
      assert.equal(create?.status, 404, "the engine refused the create");
    } finally {
      docker.setImage(IMAGE, "sandboxd");
    }
  });

  test("nothing outside the Engine API was asked for", () => {
    assert.deepEqual(docker.unknown, []);
  });
});

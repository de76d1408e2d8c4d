// The platform's side of a room's container, end to end: the worker on
// workerd with a container-enabled Sandbox object, workerd's container
// client driving the real Docker engine of ./support/engine.mjs (the
// repository's sandbox image under a tag of each suite's own, beside our
// networking sidecar), except where said.
//
// - Its network. `SANDBOX_INTERNET` (on unless set to off) becomes the start
//   option `enableInternet`. workerd does not send it to the engine: the
//   container is created alike either way, running its image's own
//   entrypoint in the network namespace of its egress sidecar (named after
//   it, "<name>-proxy"); a value that is neither on nor off starts none.
//   workerd sends it to the sidecar (`PUT /egress` with
//   `{"internet": {"enabled": …}}`) and enforces it itself, on the egress
//   listener every outbound connection of the container is handed to. That
//   half runs on the stand-in engine of ./support/fake-docker.mjs, whose
//   `dialOut` plays proxy-everything's capture of such a connection: our
//   sidecar neither reports what workerd told it nor captures the
//   container's connections (see its header), so on the real engine the
//   setting cannot be seen at work. With the internet on, the bytes reach
//   a local server standing for a host on the internet; off, workerd
//   accepts the tunnel and closes it unused.
// - Its stop once its object is gone. The Sandbox object does not await its
//   container's exit (workerd follows it itself), so nothing pending keeps
//   the object in memory: it leaves between commands (workerd evicts an
//   object 10 s after its last event). workerd then keeps the container
//   until the last inactivity timeout the object set runs out, and removes
//   it and its sidecar; it keeps that timer itself, so the engine sees only
//   the removal. Here the sandbox's sleep is an hour away, so no alarm
//   fires, and the timeout is 4 s (`SANDBOX_INACTIVITY_TIMEOUT_SECONDS`; by
//   default it is a minute longer than the sleep, which then always comes
//   first). The object is evicted by the test where the timing matters, and
//   left to the runtime in the last case.
// - `SANDBOX_URL`: the setting is not enforced there, and breaks nothing.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import fs from "node:fs";
import net from "node:net";
import path from "node:path";
import { after, before, describe, test } from "node:test";

import { SIDECAR_IMAGE, startEngine } from "./support/engine.mjs";
import { startFakeDocker } from "./support/fake-docker.mjs";
import { exec } from "./support/rooms.mjs";
import { startStack, startWorker } from "./support/stack.mjs";
import { until } from "./support/wait.mjs";

/** The sandbox image as the stand-in engine knows it. */
const FAKE_IMAGE = "duet-sandbox:test";

/** A TCP server standing for a host on the internet: answers each line with "pong <line>". */
async function startRemoteHost() {
  const server = net.createServer((socket) => {
    socket.on("data", (data) => socket.write(`pong ${data}`));
    socket.on("error", () => {});
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { address: `127.0.0.1:${server.address().port}`, port: server.address().port, close: () => new Promise((resolve) => server.close(resolve)) };
}

/** Sends "ping\n" on a paused socket; resolves with everything read until it ends (or 3 s pass). */
function exchange(socket) {
  return new Promise((resolve) => {
    let read = "";
    const done = () => {
      clearTimeout(timer);
      socket.destroy();
      resolve(read);
    };
    const timer = setTimeout(done, 3000);
    socket.on("data", (data) => {
      read += data;
      if (read.endsWith("\n")) done();
    });
    socket.once("end", done);
    socket.once("error", done);
    socket.resume();
    socket.write("ping\n");
  });
}

/** The stand-in's rooms, as `worker` opens them. */
function fakeRooms(docker, worker) {
  /** The one container of the image holding the room's workspace. */
  const containerOf = (room) => {
    const found = docker.containersOf(FAKE_IMAGE).filter((c) => c.root !== null && fs.existsSync(path.join(c.root, `sandbox-${room}`)));
    assert.equal(found.length, 1, `one container holds room ${room}`);
    return found[0];
  };
  /** Runs a first command in a new room: its container and that container's network owner (the sidecar). */
  async function open(cmd) {
    const room = randomUUID();
    const res = await exec(worker, room, cmd);
    assert.equal(res.status, 200, res.text);
    const c = containerOf(room);
    return { c, sidecar: c.hostConfig.NetworkMode.replace(/^container:/, "") };
  }
  return { open };
}

/** The engine's rooms, as `worker` opens them on containers of `image`. */
function engineRooms(engine, image, worker) {
  /** The one container of the image holding the room's workspace. */
  async function containerOf(room) {
    const found = await engine.containersOfRoom(image, room);
    assert.equal(found.length, 1, `one container holds room ${room}`);
    return found[0];
  }
  /**
   * Runs a first command in a new room: the room, its container, its sidecar
   * (workerd names it after the container), when the command began, and
   * where the engine's events about them start.
   */
  async function open(cmd) {
    const room = randomUUID();
    const since = engine.now();
    const started = Date.now();
    const res = await exec(worker, room, cmd);
    assert.equal(res.status, 200, res.text);
    const c = await containerOf(room);
    return { room, c, sidecar: await engine.inspect(`${c.name}-proxy`), started, since };
  }
  return { containerOf, open };
}

describe("SANDBOX_INTERNET, through workerd, to the container's network", () => {
  let engine, image, cleanup, entrypoint;
  const workers = {};
  before(async () => {
    engine = startEngine();
    image = await engine.imageFor("platform-internet");
    cleanup = await engine.follow(image);
    entrypoint = (await engine.api("GET", `/images/${encodeURIComponent(image)}/json`)).json.Config.Entrypoint;
    const container = { socketPath: engine.socketPath, imageName: image, egressImage: SIDECAR_IMAGE };
    // Unset (the default), off, and a typo.
    for (const [name, value] of [["default", undefined], ["off", "off"], ["typo", "of"]]) {
      workers[name] = await startWorker({ container, vars: value === undefined ? {} : { SANDBOX_INTERNET: value } });
    }
  });
  after(async () => {
    for (const worker of Object.values(workers)) await worker.stop();
    await cleanup?.removeAll();
    await engine?.untag(image);
  });

  test("on or off, the engine sees the same container: the image's own entrypoint, in its sidecar's network namespace", async () => {
    const seen = {};
    for (const name of ["default", "off"]) {
      const { c, sidecar } = await engineRooms(engine, image, workers[name]).open("true");
      assert.deepEqual(c.command, entrypoint, "no entrypoint given: the image's own runs");
      // The container joins its sidecar's network namespace, nothing else.
      assert.equal(sidecar?.status, "running", "its sidecar runs");
      assert.equal(sidecar.image, SIDECAR_IMAGE);
      assert.equal(c.networkMode, `container:${sidecar.id}`);
      const { Config, HostConfig } = (await engine.api("GET", `/containers/${c.id}/json`)).json;
      // All but what names this container and its worker.
      const Labels = { ...Config.Labels, "dev.workerd.session": undefined };
      seen[name] = { Config: { ...Config, Hostname: undefined, Labels }, HostConfig: { ...HostConfig, NetworkMode: undefined } };
    }
    assert.deepEqual(seen.off, seen.default, "created alike: the setting is not the engine's");
  });

  test("a value that is neither on nor off starts no container: a JSON 503 naming the setting", async () => {
    const before = (await engine.containersOf(image)).length;
    const res = await exec(workers.typo, randomUUID(), "echo hi");
    assert.equal(res.status, 503, res.text);
    assert.match(res.json.error, /SANDBOX_INTERNET is "of"; set it to "on" or "off"/);
    assert.equal((await engine.containersOf(image)).length, before, "no container created");
  });
});

// What workerd tells the sidecar, and what it does with a connection the
// container opens, stay on the stand-in: the real engine's sidecar (our
// own, sidecar/) keeps `PUT /egress` to itself and does not capture the
// container's outbound connections, which leave through the engine's
// bridge as from any container. proxy-everything hands each to workerd's
// egress listener (iptables TPROXY), and that is where the setting is
// enforced; the stand-in's `dialOut` plays that half.
describe("SANDBOX_INTERNET, enforced by workerd on the egress sidecar's connections (stand-in engine)", () => {
  let docker, remote;
  const workers = {};
  before(async () => {
    docker = await startFakeDocker({ images: { [FAKE_IMAGE]: "sandboxd" } });
    remote = await startRemoteHost();
    const container = { socketPath: docker.socketPath, imageName: FAKE_IMAGE, egressImage: docker.egressImage };
    for (const [name, value] of [["default", undefined], ["off", "off"]]) {
      workers[name] = await startWorker({ container, vars: value === undefined ? {} : { SANDBOX_INTERNET: value } });
    }
  });
  after(async () => {
    for (const worker of Object.values(workers)) await worker.stop();
    await docker?.close();
    await remote?.close();
  });

  for (const [name, expected] of [["default", "on"], ["off", "off"]]) {
    test(`${name === "default" ? "unset, the internet is on" : "off, the internet is off"}: workerd tells the sidecar and enforces it`, async () => {
      const { c, sidecar: owner } = await fakeRooms(docker, workers[name]).open("true");
      const sidecar = docker.container(owner);
      assert.deepEqual(sidecar.egress.internet, { enabled: expected === "on" }, "what workerd told the sidecar");
      assert.ok(sidecar.proxyCalls.includes("PUT /egress"));
      // What workerd does with a connection the container opens.
      const answer = await exchange(await docker.dialOut(c.name, remote.address));
      assert.equal(answer, expected === "on" ? "pong ping\n" : "", "the host reached only with the internet on");
    });
  }
});

describe("the runtime keeps a container for its inactivity timeout once its object is gone, then stops it", () => {
  let engine, image, cleanup, worker, rooms;
  const TIMEOUT_MS = 4000;
  before(async () => {
    engine = startEngine();
    image = await engine.imageFor("platform-timeout");
    cleanup = await engine.follow(image);
    worker = await startWorker({
      container: { socketPath: engine.socketPath, imageName: image, egressImage: SIDECAR_IMAGE },
      vars: { SANDBOX_IDLE_SECONDS: "3600", SANDBOX_INACTIVITY_TIMEOUT_SECONDS: String(TIMEOUT_MS / 1000) },
    });
    rooms = engineRooms(engine, image, worker);
  });
  after(async () => {
    await worker?.stop();
    await cleanup?.removeAll();
    await engine?.untag(image);
  });
  const evict = (room) => worker.evict("Sandbox", `sandbox-${room}`);
  /** Waits (at most `ms` from `since`) until the container and its sidecar are gone from the engine; resolves with the ms from `since` until the container went. */
  async function removal(c, sidecar, since, ms) {
    let went;
    const gone = async () => {
      if (!(await engine.inspect(c.id))) went ??= Date.now() - since;
      return went !== undefined && !(await engine.inspect(sidecar.id));
    };
    await until("the container and its sidecar to go", gone, since + ms - Date.now(), { every: 100 }).catch(() => {});
    return went;
  }
  /** The container and its sidecar are gone, removed by workerd; no sleep did it. */
  async function assertRemoved({ c, sidecar, since }) {
    assert.equal(await engine.inspect(c.id), undefined, "the container is gone");
    assert.equal(await engine.inspect(sidecar.id), undefined, "its sidecar with it");
    for (const { id } of [c, sidecar]) assert.ok((await engine.eventsOf(id, since)).some((e) => e.action === "destroy"), "removed through the Engine API");
    assert.equal(worker.logs.filter((line) => line.includes('"event":"sleep"')).length, 0, "no alarm fired");
  }

  test("an object gone within the timeout: the next command finds the same container, shell and all", async () => {
    const { room, c, since } = await rooms.open("mkdir kept && cd kept && export KEPT=yes");
    await evict(room);
    assert.equal((await engine.inspect(c.id)).status, "running", "kept after its object went");
    const res = await exec(worker, room, 'echo "$(basename "$PWD") $KEPT"');
    assert.equal(res.status, 200, res.text);
    assert.equal(res.json.result.stdout, "kept yes\n");
    const now = await rooms.containerOf(room);
    assert.equal(now.id, c.id);
    assert.equal(now.pid, c.pid, "the same sandboxd");
    assert.equal(now.restarts, 0);
    assert.deepEqual((await engine.eventsOf(c.id, since)).filter((e) => e.action === "start").length, 1, "started once");
  });

  test("an object gone for longer: its container is removed when the timeout runs out, not before", async () => {
    const opened = await rooms.open("echo data > f.txt");
    const { room, c, sidecar, started } = opened;
    await evict(room);
    assert.equal((await engine.inspect(c.id)).status, "running", "kept after its object went");
    const after = await removal(c, sidecar, started, TIMEOUT_MS + 8000);
    await assertRemoved(opened);
    assert.ok(after >= TIMEOUT_MS, `removed ${after} ms after the command, not before the timeout`);

    // The next command starts afresh: files since the last sleep are lost.
    const res = await exec(worker, room, "cat f.txt 2>/dev/null || echo none");
    assert.equal(res.status, 200, res.text);
    assert.equal(res.json.result.stdout, "none\n");
    assert.notEqual((await rooms.containerOf(room)).id, c.id);
  });

  test("left alone, the object leaves memory by itself and the runtime removes its container", async () => {
    const opened = await rooms.open("true");
    // workerd evicts an object 10 s after its last event; the timeout ran out before.
    const after = await removal(opened.c, opened.sidecar, opened.started, 25_000);
    await assertRemoved(opened);
    assert.ok(after >= 10_000, `removed ${after} ms after the command: once the object left`);
  });
});

describe("SANDBOX_URL: SANDBOX_INTERNET is not enforced there", () => {
  let stack, remote;
  before(async () => {
    remote = await startRemoteHost();
    stack = await startStack({ vars: { SANDBOX_INTERNET: "off" } });
  });
  after(async () => {
    await stack?.stop();
    await remote?.close();
  });

  test("commands run, and reach what sandboxd's host reaches", async () => {
    const cmd = `exec 3<>/dev/tcp/127.0.0.1/${remote.port}; echo ping >&3; head -n 1 <&3`;
    const res = await exec(stack.worker, randomUUID(), cmd);
    assert.equal(res.status, 200, res.text);
    assert.equal(res.json.result.stdout, "pong ping\n");
  });
});

// The platform's side of a room's container, end to end: the worker on
// workerd with a container-enabled Sandbox object, workerd's container
// client driving the Docker Engine API stand-in of ./support/fake-docker.mjs
// (whose containers run the real sandboxd).
//
// - Its network. `SANDBOX_INTERNET` (on unless set to off) becomes the start
//   option `enableInternet`. workerd does not send it to the engine: the
//   container is created alike either way, in the network namespace of its
//   egress sidecar. workerd sends it to the sidecar (`PUT /egress` with
//   `{"internet": {"enabled": …}}`) and enforces it itself, on the egress
//   listener every outbound connection of the container is handed to.
//   `dialOut` plays the sidecar's half of such a connection, so what is
//   asserted is what workerd does with it: with the internet on, the bytes
//   reach a local server standing for a host on the internet; off, workerd
//   accepts the tunnel and closes it unused.
// - Its stop once its object is gone. The Sandbox object does not await its
//   container's exit (workerd follows it itself), so nothing pending keeps
//   the object in memory: it leaves between commands (workerd evicts an
//   object 10 s after its last event). workerd then keeps the container
//   until the last inactivity timeout the object set runs out, and removes
//   it; it keeps that timer itself, so the engine sees only the removal.
//   Here the sandbox's sleep is an hour away, so no alarm fires, and the
//   timeout is 4 s (`SANDBOX_INACTIVITY_TIMEOUT_SECONDS`; by default it is
//   a minute longer than the sleep, which then always comes first). The
//   object is evicted by the test where the timing matters, and left to
//   the runtime in the last case.
// - `SANDBOX_URL`: the setting is not enforced there, and breaks nothing.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import fs from "node:fs";
import net from "node:net";
import path from "node:path";
import { after, before, describe, test } from "node:test";

import { startFakeDocker } from "./support/fake-docker.mjs";
import { exec } from "./support/rooms.mjs";
import { startStack, startWorker } from "./support/stack.mjs";
import { until } from "./support/wait.mjs";

const IMAGE = "duet-sandbox:test";

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

function rooms(docker, worker) {
  /** The one container of the image holding the room's workspace. */
  const containerOf = (room) => {
    const found = docker.containersOf(IMAGE).filter((c) => c.root !== null && fs.existsSync(path.join(c.root, `sandbox-${room}`)));
    assert.equal(found.length, 1, `one container holds room ${room}`);
    return found[0];
  };
  /** Runs a first command in a new room: the room, its container and that container's network owner (the sidecar), and when it began. */
  async function open(cmd) {
    const room = randomUUID();
    const started = Date.now();
    const res = await exec(worker, room, cmd);
    assert.equal(res.status, 200, res.text);
    const c = containerOf(room);
    return { room, c, sidecar: c.hostConfig.NetworkMode.replace(/^container:/, ""), started };
  }
  return { containerOf, open };
}

describe("SANDBOX_INTERNET, through workerd, to the container's network", () => {
  let docker, remote;
  const workers = {};
  before(async () => {
    docker = await startFakeDocker({ images: { [IMAGE]: "sandboxd" } });
    remote = await startRemoteHost();
    const container = { socketPath: docker.socketPath, imageName: IMAGE, egressImage: docker.egressImage };
    // Unset (the default), off, and a typo.
    for (const [name, value] of [["default", undefined], ["off", "off"], ["typo", "of"]]) {
      workers[name] = await startWorker({ container, vars: value === undefined ? {} : { SANDBOX_INTERNET: value } });
    }
  });
  after(async () => {
    for (const worker of Object.values(workers)) await worker.stop();
    await docker?.close();
    await remote?.close();
  });

  for (const [name, expected] of [["default", "on"], ["off", "off"]]) {
    test(`${name === "default" ? "unset, the internet is on" : "off, the internet is off"}: workerd tells the sidecar and enforces it; the engine sees the same container`, async () => {
      const { c, sidecar: owner } = await rooms(docker, workers[name]).open("true");
      assert.equal(c.config.Cmd, undefined, "no entrypoint given: the image's own runs");
      // The Engine API's part is the same for both settings: the container
      // joins its sidecar's network namespace, nothing else.
      assert.match(c.hostConfig.NetworkMode, /^container:.+-proxy$/);
      const sidecar = docker.container(owner);
      assert.equal(sidecar.status, "running");
      assert.deepEqual(sidecar.egress.internet, { enabled: expected === "on" }, "what workerd told the sidecar");
      assert.ok(sidecar.proxyCalls.includes("PUT /egress"));

      // What workerd does with a connection the container opens.
      const answer = await exchange(await docker.dialOut(c.name, remote.address));
      assert.equal(answer, expected === "on" ? "pong ping\n" : "", "the host reached only with the internet on");
    });
  }

  test("a value that is neither on nor off starts no container: a JSON 503 naming the setting", async () => {
    const before = docker.containersOf(IMAGE).length;
    const res = await exec(workers.typo, randomUUID(), "echo hi");
    assert.equal(res.status, 503, res.text);
    assert.match(res.json.error, /SANDBOX_INTERNET is "of"; set it to "on" or "off"/);
    assert.equal(docker.containersOf(IMAGE).length, before, "no container created");
  });
});

describe("the runtime keeps a container for its inactivity timeout once its object is gone, then stops it", () => {
  let docker, worker;
  const TIMEOUT_MS = 4000;
  before(async () => {
    docker = await startFakeDocker({ images: { [IMAGE]: "sandboxd" } });
    worker = await startWorker({
      container: { socketPath: docker.socketPath, imageName: IMAGE, egressImage: docker.egressImage },
      vars: { SANDBOX_IDLE_SECONDS: "3600", SANDBOX_INACTIVITY_TIMEOUT_SECONDS: String(TIMEOUT_MS / 1000) },
    });
  });
  after(async () => {
    await worker?.stop();
    await docker?.close();
  });
  const evict = (room) => worker.evict("Sandbox", `sandbox-${room}`);
  /** Waits (at most `ms` from `since`) until the container and its sidecar are gone from the engine; resolves with the ms from `since` until the container went. */
  async function removal(c, sidecar, since, ms) {
    let went;
    const gone = () => {
      if (!docker.container(c.id)) went ??= Date.now() - since;
      return went !== undefined && !docker.container(sidecar);
    };
    await until("the container and its sidecar to go", gone, since + ms - Date.now(), { every: 50 }).catch(() => {});
    return went;
  }
  /** The container and its sidecar are gone, removed by workerd; no sleep did it. */
  function assertRemoved(c, sidecar) {
    assert.equal(docker.container(c.id), undefined, "the container is gone");
    assert.equal(docker.container(sidecar), undefined, "its sidecar with it");
    assert.ok(docker.log().includes(`DELETE /containers/${encodeURIComponent(c.name)}?force=true`), "removed through the Engine API");
    assert.equal(worker.logs.filter((line) => line.includes('"event":"sleep"')).length, 0, "no alarm fired");
  }

  test("an object gone within the timeout: the next command finds the same container, shell and all", async () => {
    const { containerOf, open } = rooms(docker, worker);
    const { room, c } = await open("mkdir kept && cd kept && export KEPT=yes");
    const pid = c.pid;
    await evict(room);
    assert.equal(c.status, "running", "kept after its object went");
    const res = await exec(worker, room, 'echo "$(basename "$PWD") $KEPT"');
    assert.equal(res.status, 200, res.text);
    assert.equal(res.json.result.stdout, "kept yes\n");
    assert.equal(containerOf(room), c);
    assert.equal(c.pid, pid, "the same sandboxd");
    assert.equal(c.runs, 1, "never restarted");
  });

  test("an object gone for longer: its container is removed when the timeout runs out, not before", async () => {
    const { containerOf, open } = rooms(docker, worker);
    const { room, c, sidecar, started } = await open("echo data > f.txt");
    await evict(room);
    assert.equal(c.status, "running", "kept after its object went");
    const after = await removal(c, sidecar, started, TIMEOUT_MS + 5000);
    assertRemoved(c, sidecar);
    assert.ok(after >= TIMEOUT_MS, `removed ${after} ms after the command, not before the timeout`);

    // The next command starts afresh: files since the last sleep are lost.
    const res = await exec(worker, room, "cat f.txt 2>/dev/null || echo none");
    assert.equal(res.status, 200, res.text);
    assert.equal(res.json.result.stdout, "none\n");
    assert.notEqual(containerOf(room).id, c.id);
  });

  test("left alone, the object leaves memory by itself and the runtime removes its container", async () => {
    const { c, sidecar, started } = await rooms(docker, worker).open("true");
    // workerd evicts an object 10 s after its last event; the timeout ran out before.
    const after = await removal(c, sidecar, started, 20_000);
    assertRemoved(c, sidecar);
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

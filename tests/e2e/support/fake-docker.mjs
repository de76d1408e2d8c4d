// A stand-in for the Docker Engine, as strict as the real one about the part
// of its HTTP API that workerd's container client and Miniflare use (API
// 1.47, Docker 27), served on a unix socket. The container path's tests run
// on a real engine (./engine.mjs); this one serves only what a real engine
// cannot be made to show on demand (a first process that dies before the
// engine notices) and the egress side of workerd's sidecar, which the
// sidecar built here does not reproduce (sidecar/src/main.rs). workerd drives a Durable
// Object's container through it exactly as it drives Docker; the
// "containers" are local processes:
//
// - the Sandbox image (e.g. "duet-sandbox:test") runs sandboxd like the
//   Dockerfile's ENTRYPOINT, with a fresh root directory per container (its
//   filesystem: kept across restarts, deleted on remove) and a fresh loopback
//   port standing for port 8080 of its network namespace;
// - the egress interceptor image (workerd's "proxy-everything" sidecar, which
//   owns the network namespace the Sandbox container joins) is served in
//   process.
//
// Container state is tracked like Docker does: created, running, paused,
// restarting (the restart policy workerd asks for is honoured, with Docker's
// backoff), exited (with the exit code; a process killed by a signal exits
// 128+n, as under tini), removing. A wait returns on every exit, restarts
// included.
//
// This module is its public face; the engine is in ./docker/: the state
// (engine.mjs), the Engine API's routes (router.mjs, which lists them),
// container operations (containers.mjs), their processes (processes.mjs,
// entrypoints.mjs), waits (waits.mjs), network namespaces and the sidecar
// (network.mjs, sidecar.mjs), reports (views.mjs, system.mjs), and what
// tests do from outside the engine (faults.mjs).
import fs from "node:fs";
import path from "node:path";

import { discardAll } from "./docker/containers.mjs";
import { Engine } from "./docker/engine.mjs";
import { crash, noticeExit } from "./docker/faults.mjs";
import { listen } from "./docker/router.mjs";
import { dialOut } from "./docker/sidecar.mjs";
import { tempDir } from "./stack.mjs";

/** The sidecar image this stand-in serves unless told otherwise. */
export const EGRESS_IMAGE = "duet-proxy-everything:test";

/**
 * Starts the stand-in. `images` maps image names to an entrypoint kind
 * ("sandboxd"), which may be followed by arguments for it; the egress image
 * is always known.
 */
export async function startFakeDocker({ images = {}, egressImage = EGRESS_IMAGE } = {}) {
  const dir = tempDir("docker");
  const socketPath = path.join(dir, "docker.sock");
  const engine = new Engine({ images, egressImage });
  const stopServing = await listen(engine, socketPath);
  return {
    socketPath,
    /** What Miniflare's `containerEngine.localDocker.socketPath` takes. */
    engine: `unix://${socketPath}`,
    egressImage,
    /** The live state of one container (by name or id, as the API takes it), or undefined. */
    container: (ref) => engine.find(ref),
    /** Containers of an image. */
    containersOf: (image) => [...engine.containers.values()].filter((c) => c.image === image),
    /** Kills a running container's processes from outside the engine (see docker/faults.mjs). */
    crash: (name, signal = "SIGKILL", { unnoticed = false } = {}) => crash(engine, name, signal, { unnoticed }),
    /** The engine processes the exit `crash(name, signal, {unnoticed: true})` left. */
    noticeExit: (name) => noticeExit(engine, name),
    /** A TCP connection container `name` opens to `address`, through its sidecar (see docker/sidecar.mjs). */
    dialOut: (name, address) => dialOut(engine, engine.byName(name), address),
    async close() {
      await discardAll(engine);
      await stopServing();
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

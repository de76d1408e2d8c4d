// A container's processes and the engine's part in their life: running the
// first one (the sidecar in process, any other image through its
// entrypoint, in the network namespace it joins), processing its exit (the
// exit code, 128+n for a signal as under tini; the restart policy, with
// Docker's backoff), signalling, freezing and thawing, and stopping with a
// timeout. The whole container goes when its first process does.
import os from "node:os";

import { DockerError } from "./engine.mjs";
import { SANDBOX_PORT, spawnEntrypoint } from "./entrypoints.mjs";
import { namespaceOwner } from "./network.mjs";
import { startSidecar, stopSidecar } from "./sidecar.mjs";
import { notifyExit } from "./waits.mjs";

export const SIGNALS = os.constants.signals;

/** Runs container `c`'s first process. */
export function launch(engine, c) {
  c.status = "running";
  c.startedAt = new Date().toISOString();
  c.runs += 1;
  if (c.kind === "proxy") {
    startSidecar(c);
    return;
  }
  const ns = namespaceOwner(engine, c).ns;
  if (!c.port) throw new DockerError(500, "container has no port"); // set at create
  const child = spawnEntrypoint(c);
  c.child = child;
  c.pid = child.pid ?? 0;
  ns.ports.set(SANDBOX_PORT, c.port);
  child.once("exit", (code, signal) => {
    try {
      process.kill(-child.pid, "SIGKILL");
    } catch {}
    if (ns.ports.get(SANDBOX_PORT) === c.port) ns.ports.delete(SANDBOX_PORT);
    const status = code ?? 128 + (SIGNALS[signal] ?? 0);
    if (c.unnoticed) {
      // Dead, but the engine has not processed the exit yet.
      c.unnoticed = () => exited(engine, c, status);
    } else {
      exited(engine, c, status);
    }
  });
}

/** The engine processes an exit it has not noticed yet (see faults.mjs). */
export function notice(c) {
  const pending = c.unnoticed;
  c.unnoticed = null;
  if (typeof pending === "function") pending();
}

/** The engine processes container `c`'s exit with `code`: its state, the restart policy, the waits on it. */
function exited(engine, c, code) {
  c.child = null;
  c.pid = 0;
  c.exitCode = code;
  c.finishedAt = new Date().toISOString();
  const policy = c.hostConfig.RestartPolicy ?? {};
  const max = policy.MaximumRetryCount ?? 0;
  const restart =
    !c.manualStop &&
    c.status !== "removing" &&
    (policy.Name === "always" ||
      policy.Name === "unless-stopped" ||
      (policy.Name === "on-failure" && code !== 0 && (max === 0 || c.restartCount < max)));
  if (restart) {
    // Docker's backoff: 100 ms doubling, reset after 10 s of running.
    const ran = Date.now() - Date.parse(c.startedAt);
    c.backoff = ran > 10_000 ? 100 : Math.min((c.backoff ?? 50) * 2, 60_000);
    c.restartCount += 1;
    c.status = "restarting";
    c.restartTimer = setTimeout(() => {
      c.restartTimer = null;
      if (c.status !== "restarting") return;
      try {
        launch(engine, c);
      } catch (e) {
        c.status = "exited";
        c.error = e.message;
      }
    }, c.backoff);
  } else if (c.status !== "removing") {
    c.status = "exited";
  }
  notifyExit(c);
}

/** Signals a running container's processes; resolves once it exited. */
export function signalContainer(engine, c, signal) {
  const done = new Promise((resolve) => c.exitWaiters.push(resolve));
  if (c.kind === "proxy") {
    stopSidecar(c);
    exited(engine, c, 128 + (SIGNALS[signal] ?? 9));
  } else if (c.unnoticed) {
    // Acting on it makes the engine find out it is gone (or, when it is
    // still dying, has it processed the exit as usual).
    if (c.unnoticed === true) c.unnoticed = null;
    else notice(c);
  } else if (c.child) {
    try {
      process.kill(-c.child.pid, signal);
    } catch {
      c.child.kill(signal);
    }
    // A paused container's processes get the signal once thawed, as the
    // daemon thaws a paused container it stops or kills.
    if (c.status === "paused") thaw(c);
  }
  return done;
}

export function freeze(c) {
  process.kill(-c.child.pid, "SIGSTOP");
  c.status = "paused";
}

export function thaw(c) {
  c.status = "running";
  try {
    process.kill(-c.child.pid, "SIGCONT");
  } catch {}
}

/** Stops container `c`: its stop signal, then SIGKILL after `seconds`; resolves once it exited. */
export async function stopContainer(engine, c, seconds) {
  c.manualStop = true;
  if (c.status === "restarting") {
    clearTimeout(c.restartTimer);
    c.status = "exited";
    notifyExit(c);
    return;
  }
  const done = signalContainer(engine, c, c.config.StopSignal || "SIGTERM");
  const timer = setTimeout(() => c.child && signalContainer(engine, c, "SIGKILL"), seconds * 1000);
  await done;
  clearTimeout(timer);
}

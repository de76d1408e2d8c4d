// What a test does to a container from outside the engine, as a crash or
// the OOM killer would: its processes killed, with the engine noticing at
// once, or only when told (the window, short with a real engine, between a
// container's death and the engine reporting it). The restart policy then
// applies as in Docker.
import { notice, signalContainer } from "./processes.mjs";
import { reported } from "./waits.mjs";

/**
 * Kills container `name`'s processes; resolves with the exit code once it
 * has exited and the engine has answered every wait on it. With
 * `{ unnoticed: true }` the engine does not process the exit (state, waits,
 * restart policy) until `noticeExit`; resolves once the processes are gone.
 */
export async function crash(engine, name, signal, { unnoticed }) {
  const c = engine.byName(name);
  if (c.status !== "running" || !c.child) throw new Error(`container ${name} is not running`);
  const child = c.child;
  if (unnoticed) {
    c.unnoticed = true;
    const gone = new Promise((resolve) => child.once("exit", resolve));
    process.kill(-child.pid, signal);
    await gone;
    return undefined;
  }
  const waits = new Set(c.waits);
  const code = await signalContainer(engine, c, signal);
  await reported(waits);
  return code;
}

/** The engine processes the exit `crash` left unnoticed; resolves with its code once every wait on it was answered. */
export async function noticeExit(engine, name) {
  const c = engine.byName(name);
  if (typeof c.unnoticed !== "function") throw new Error(`container ${name} has no unnoticed exit`);
  const waits = new Set(c.waits);
  notice(c);
  await reported(waits);
  return c.exitCode;
}

// Waits on a container: `POST /containers/{id}/wait` (200/404/400) and the
// engine's side of it, which answers every wait on each exit (restarts
// included) and every `condition=removed` wait on removal. A wait is a
// call answered late, so whether an exit has been reported is whether the
// waits on it were sent (see `reported`).
import { DockerError, isUp } from "./engine.mjs";

/** Answers every wait on `c`'s next exit with its exit code. */
export function notifyExit(c) {
  const waiters = c.exitWaiters;
  c.exitWaiters = [];
  for (const resolve of waiters) resolve(c.exitCode);
}

/** Answers every wait on `c`'s removal. */
export function notifyRemoved(c) {
  for (const resolve of c.removeWaiters.splice(0)) resolve(c.exitCode);
}

/** `POST /containers/{id}/wait?condition=...`, answered with the exit code once the condition holds. */
export async function wait(c, condition, call) {
  if (condition === "removed") {
    const code = await new Promise((resolve) => c.removeWaiters.push(resolve));
    return [200, { StatusCode: code, Error: null }];
  }
  if (condition === "not-running" || !condition) {
    if (!isUp(c)) return [200, { StatusCode: c.exitCode, Error: null }];
  } else if (condition !== "next-exit") {
    throw new DockerError(400, `invalid condition: "${condition}"`);
  }
  c.waits.add(call);
  const code = await new Promise((resolve) => c.exitWaiters.push(resolve));
  c.waits.delete(call);
  return [200, { StatusCode: code, Error: null }];
}

/** Resolves once the engine has answered every wait call in `waits` (sent them the exit). */
export const reported = (waits) => Promise.all([...waits].map((call) => call.sent));

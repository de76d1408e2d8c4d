// Waiting in the tests and their stand-ins: a pause of a fixed time, and a
// condition polled until it holds.

/** Resolves after `ms` milliseconds. */
export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Polls `check` (it may be async) until it answers something truthy, and
 * answers that. Once `ms` have passed without, throws an Error naming
 * `what` (a text, or a function asked for one then, to tell what was seen)
 * and the time waited. An error `check` throws ends the wait at once.
 * `every` is the pause between two polls.
 */
export async function until(what, check, ms = 15_000, { every = 25 } = {}) {
  const started = Date.now();
  for (;;) {
    const value = await check();
    if (value) return value;
    const waited = Date.now() - started;
    if (waited > ms) throw new Error(`timed out after ${waited} ms waiting for ${typeof what === "function" ? what() : what}`);
    await sleep(every);
  }
}

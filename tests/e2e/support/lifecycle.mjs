// What the lifecycle tests wait on: the worker's lifecycle log lines
// (sleep, wake, stay-awake, expire) and conditions that come true in time.

export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** The worker's lifecycle log lines for `room`. */
export function events(worker, room) {
  return worker.logs
    .filter((line) => line.startsWith("{") && line.includes('"event"'))
    .map((line) => JSON.parse(line))
    .filter((l) => l.room === room);
}

/** Polls `check` until it answers something truthy, for at most `ms`. */
export async function until(what, check, ms = 15_000) {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await check();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(100);
  }
}

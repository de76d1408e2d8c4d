// What the lifecycle tests wait on: the worker's lifecycle log lines
// (sleep, wake, stay-awake, expire).
import { until } from "./wait.mjs";

/** The worker's lifecycle log lines for `room`. */
export function events(worker, room) {
  return worker.logs
    .filter((line) => line.startsWith("{") && line.includes('"event"'))
    .map((line) => JSON.parse(line))
    .filter((l) => l.room === room);
}

/**
 * The room's first lifecycle line of `event` (a name, or a list of names:
 * the first line of any of them), once the worker has logged one; waits at
 * most `ms` (until's bound unless given).
 */
export function untilEvent(worker, room, event, ms) {
  const names = [event].flat();
  return until(`the room's ${names.join(" or ")}`, () => events(worker, room).find((e) => names.includes(e.event)), ms);
}

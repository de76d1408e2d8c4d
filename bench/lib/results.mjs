// Writes one measurement's section of a results file: into an existing file
// (the suite's latest.json, `--merge`), or into a file of its own; and what
// a measurement says as it goes.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";

import { round } from "./load.mjs";

/**
 * A measurement's progress: `log` writes a line to stderr, named and timed;
 * `loadavg` notes the machine's load averages under a label, in `loadavgs`.
 */
export function progress(name) {
  const loadavgs = [];
  return {
    loadavgs,
    log: (...a) => console.error(`[${name} ${(performance.now() / 1000).toFixed(1)}s]`, ...a),
    loadavg: (label) => loadavgs.push({ label, at: new Date().toISOString(), loadavg: os.loadavg().map((x) => round(x, 2)) }),
  };
}

/**
 * Sets `sections[key]` to `section` in `out`: with `merge`, in the file as
 * it is (its indentation kept, so the diff shows what changed); otherwise in
 * a new file with the date and the machine's outline.
 */
export function writeSection(out, { merge, key, section }) {
  let results, indent = 1;
  if (merge) {
    const text = fs.readFileSync(out, "utf8");
    indent = (/^\{\n( +)"/.exec(text)?.[1] ?? " ").length;
    results = JSON.parse(text);
    results.sections ??= {};
    results.sections[key] = section;
  } else {
    results = { date: section.date, quick: section.quick, machine: { nproc: os.cpus().length, cpuModel: os.cpus()[0]?.model ?? "unknown", node: process.version }, sections: { [key]: section } };
  }
  fs.mkdirSync(path.dirname(out), { recursive: true });
  fs.writeFileSync(out, JSON.stringify(results, null, indent) + "\n");
}

// Writes one measurement's section of a results file: into an existing file
// (the suite's latest.json, `--merge`), or into a file of its own.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";

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

// Prints a wasm file's sections and their sizes as JSON: {"code": n, "custom:name": n, ...}.
import fs from "node:fs";

const NAMES = ["custom", "type", "import", "function", "table", "memory", "global", "export", "start", "element", "code", "data", "data-count", "tag"];

export function sections(file) {
  const b = fs.readFileSync(file);
  let p = 8;
  const leb = () => {
    let r = 0, s = 0, x;
    do { x = b[p++]; r += (x & 0x7f) * 2 ** s; s += 7; } while (x & 0x80);
    return r;
  };
  const out = {};
  while (p < b.length) {
    const id = b[p++];
    const len = leb();
    const start = p;
    let name = NAMES[id] ?? `section-${id}`;
    if (id === 0) {
      const n = leb();
      name = `custom:${b.subarray(p, p + n).toString()}`;
    }
    out[name] = (out[name] ?? 0) + len;
    p = start + len;
  }
  return out;
}

if (import.meta.url === `file://${process.argv[1]}`) console.log(JSON.stringify(sections(process.argv[2])));

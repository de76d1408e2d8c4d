// Sums twiggy's `top --format csv` rows by crate (the first path segment of a
// function's name; data, tables and custom sections by kind) and prints JSON
// with the largest crates and items.
import fs from "node:fs";

const [csvFile, topFile] = process.argv.slice(2);
const lines = fs.readFileSync(csvFile, "utf8").trim().split("\n").slice(1);
const parseCsv = (line) => {
  const out = [];
  let cur = "", quoted = false;
  for (let i = 0; i < line.length; i++) {
    const c = line[i];
    if (quoted) {
      if (c === '"' && line[i + 1] === '"') { cur += '"'; i++; }
      else if (c === '"') quoted = false;
      else cur += c;
    } else if (c === '"') quoted = true;
    else if (c === ",") { out.push(cur); cur = ""; }
    else cur += c;
  }
  out.push(cur);
  return out;
};
const crateOf = (name) => {
  if (/names" subsection$/.test(name)) return "name section (function and data names)";
  if (/^custom section/.test(name)) return name;
  if (/^data segment/.test(name) || /^data\[/.test(name)) return "data segments (strings, tables)";
  if (/^(elem|table|type|import|export|global|memory)\b/.test(name)) return "wasm structure";
  if (/(externref|multivalue) shim$|^__wbg|^__wbindgen|^__externref|^[a-z]+_(new|fetch|connect|alarm|webSocket\w*)\b|^intounderlying/.test(name)) return "wasm-bindgen glue and shims";
  const m = name.replace(/^[<&*( ]+/, "").match(/([A-Za-z_][A-Za-z0-9_]*)(?:\[[0-9a-f]+\])?::/);
  if (m) return m[1];
  if (/^(memcpy|memset|memmove|memcmp|__rust|rust_|dlmalloc|__rdl|__rg)/.test(name)) return "runtime (alloc, mem*)";
  return "other";
};
const byCrate = new Map();
let total = 0;
const items = [];
for (const line of lines) {
  const [name, shallow] = parseCsv(line);
  const size = Number(shallow);
  if (!Number.isFinite(size)) continue;
  total += size;
  items.push([name, size]);
  const c = crateOf(name);
  byCrate.set(c, (byCrate.get(c) ?? 0) + size);
}
const crates = [...byCrate].sort((a, b) => b[1] - a[1]).slice(0, 20).map(([crate, bytes]) => ({ crate, bytes }));
const top = items.sort((a, b) => b[1] - a[1]).slice(0, 15).map(([name, bytes]) => ({ name: name.length > 110 ? name.slice(0, 107) + "..." : name, bytes }));
console.log(JSON.stringify({ total, crates, top, topText: topFile && fs.existsSync(topFile) ? fs.readFileSync(topFile, "utf8") : null }));

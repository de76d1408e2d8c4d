// Measures what `wrangler deploy` would upload, from the files of a dry run
// (or of the build directory) in $OUT, as scripts/size-budget describes:
// prints the figure against the budget and the target, and beside it the
// page's assets in $ASSETS (build/page/, every file in it and below),
// optionally writes both as JSON, and exits non-zero over the budget.
import fs from "node:fs";
import path from "node:path";
import zlib from "node:zlib";
const { SOURCE, OUT, LOG, JSON: jsonFile, BUDGET, TARGET, ASSETS } = process.env;
const budget = Number(BUDGET), target = Number(TARGET);
// What wrangler uploads: every module, then the main module (source maps
// and its README are written beside them but not uploaded by default).
const files = fs.readdirSync(OUT).filter((f) => !f.endsWith(".map") && f !== "README.md");
const main = files.find((f) => f === "index.js");
const modules = [...files.filter((f) => f !== main).sort(), main];
const parts = modules.map((f) => ({ name: f.replace(/^[0-9a-f]{40}-/, ""), bytes: fs.readFileSync(path.join(OUT, f)) }));
const raw = parts.reduce((n, p) => n + p.bytes.length, 0);
const gzip = zlib.gzipSync(Buffer.concat(parts.map((p) => p.bytes))).length; // as wrangler computes it
const each = Object.fromEntries(parts.map((p) => [p.name, { raw: p.bytes.length, gzip: zlib.gzipSync(p.bytes).length }]));
let wranglerLine = null;
if (SOURCE === "wrangler") wranglerLine = (fs.readFileSync(LOG, "utf8").match(/Total Upload: ([^\n]*)/) || [])[1]?.replace(/\x1b\[[0-9;]*m/g, "") ?? null;
const kib = (n) => (n / 1024).toFixed(2) + " KiB";
// The page's files, uploaded to the asset store apart from the Worker:
// shown, not counted against the budget.
const assetNames = ASSETS && fs.existsSync(ASSETS) ? fs.readdirSync(ASSETS, { recursive: true }).filter((f) => fs.statSync(path.join(ASSETS, f)).isFile()).sort() : [];
const assets = assetNames.map((name) => {
  const bytes = fs.readFileSync(path.join(ASSETS, name));
  return { name, raw: bytes.length, gzip: zlib.gzipSync(bytes).length };
});
const assetsRaw = assets.reduce((n, a) => n + a.raw, 0);
const assetsGzip = assets.reduce((n, a) => n + a.gzip, 0);
const ok = gzip <= budget, met = gzip <= target;
console.log(`upload (${SOURCE === "wrangler" ? "wrangler deploy --dry-run" : "build/ measured directly"}): ${raw} bytes (${kib(raw)}) raw, ${gzip} bytes (${kib(gzip)}) gzipped`);
for (const [name, s] of Object.entries(each)) console.log(`  ${name}: ${s.raw} bytes raw, ${s.gzip} bytes gzipped alone`);
if (wranglerLine) console.log(`  wrangler reports: Total Upload: ${wranglerLine}`);
if (assets.length) console.log(`page assets (uploaded apart, not counted): ${assets.length} files, ${assetsRaw} bytes raw, ${assetsGzip} bytes gzipped one by one`);
for (const a of assets) console.log(`  ${a.name}: ${a.raw} bytes raw, ${a.gzip} bytes gzipped`);
console.log(`budget ${budget / 1024} KiB (${budget} bytes): ${ok ? "ok" : "EXCEEDED"}, ${ok ? budget - gzip + " bytes to spare" : gzip - budget + " bytes over"}`);
console.log(`target ${target / 1024} KiB (${target} bytes): ${met ? "met" : "not met"}, ${met ? target - gzip + " bytes below" : gzip - target + " bytes above"}`);
if (jsonFile) fs.writeFileSync(jsonFile, JSON.stringify({ source: SOURCE, raw, gzip, files: each, wrangler: wranglerLine, assets: { files: assets.length, raw: assetsRaw, gzip: assetsGzip }, budget, target, withinBudget: ok, targetMet: met }, null, 2) + "\n");
process.exitCode = ok ? 0 : 1;

// Writes the web page's static assets into build/page/, the directory
// wrangler.toml hands to the platform's asset store: the HTML pages at its
// top, as they are but for the names they load, and every style sheet and
// script (ours, xterm.js's and its fit add-on) under assets/ with the first
// 10 hex digits of the SHA-256 of its content in its name. A changed file
// gets a new name, so the Worker can let browsers keep an asset for a year
// (`immutable`) while the pages themselves are asked for afresh each time.
//
//   node scripts/page.mjs            (run by scripts/build)
//
// A file names another as `/assets/<name>`; the named file is written
// first and the reference replaced by its fingerprinted name, so a file's
// own name also changes with those it loads.
import crypto from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");

/** What the page is made of: its pages, and its assets by the name the files use. */
export const PAGE = {
  pages: ["home.html", "room.html"].map((f) => path.join(ROOT, "src/web/page", f)),
  assets: {
    "duet.js": path.join(ROOT, "src/web/page/duet.js"),
    "duet.css": path.join(ROOT, "src/web/page/duet.css"),
    // The ES module builds: smaller than the UMD ones, and they set no globals.
    "xterm.js": path.join(ROOT, "node_modules/@xterm/xterm/lib/xterm.mjs"),
    "xterm.css": path.join(ROOT, "node_modules/@xterm/xterm/css/xterm.css"),
    "addon-fit.js": path.join(ROOT, "node_modules/@xterm/addon-fit/lib/addon-fit.mjs"),
  },
};

const REFERENCE = /\/assets\/([A-Za-z0-9._-]+)/g;
// The packages' source maps are not served: a browser's tools would only
// get a 404 for them.
const SOURCE_MAP = /^(\/\/# sourceMappingURL=\S+|\/\*# sourceMappingURL=\S+ \*\/)\s*$/m;

/** `name` with the first 10 hex digits of the SHA-256 of `content` before its extension. */
export function fingerprint(name, content) {
  const hash = crypto.createHash("sha256").update(content).digest("hex").slice(0, 10);
  const ext = path.extname(name);
  return `${name.slice(0, name.length - ext.length)}.${hash}${ext}`;
}

/**
 * Writes `pages` (paths) into `out` and `assets` ({name: path}) into
 * `out/assets`, fingerprinted; `out` is emptied first. Returns the names
 * given to the assets.
 */
export function buildPage({ pages, assets }, out) {
  fs.rmSync(out, { recursive: true, force: true });
  fs.mkdirSync(path.join(out, "assets"), { recursive: true });
  const written = {};
  const withNames = (file) =>
    fs.readFileSync(file, "utf8").replace(SOURCE_MAP, "").replace(REFERENCE, (_, name) => {
      if (!(name in assets)) throw new Error(`${file} loads /assets/${name}, which is not one of the page's assets`);
      return `/assets/${asset(name)}`;
    });
  const asset = (name) => {
    if (!written[name]) {
      const content = withNames(assets[name]);
      written[name] = fingerprint(name, content);
      fs.writeFileSync(path.join(out, "assets", written[name]), content);
    }
    return written[name];
  };
  for (const name of Object.keys(assets)) asset(name);
  for (const page of pages) fs.writeFileSync(path.join(out, path.basename(page)), withNames(page));
  return written;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const written = buildPage(PAGE, path.join(ROOT, "build/page"));
  console.log(`page: ${Object.values(written).join(", ")}`);
}

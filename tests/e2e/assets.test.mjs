// The page's static assets: the build step (scripts/page.mjs) names each
// by its content and rewrites the names the files load, so a change of
// content is a change of name; and the worker serves them from the asset
// store with the headers that allows (a year, immutable), the pages that
// name them with no-cache, and anything else under /assets/ as a JSON 404.
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { after, before, describe, test } from "node:test";

import { buildPage, fingerprint } from "../../scripts/page.mjs";
import { pageAssets, ROOT, startWorker, tempDir } from "./support/stack.mjs";

describe("the page's build step", () => {
  /** A page and its assets in a new folder, built into `out`: the names given and what was written. */
  function build(files) {
    const src = tempDir("page-src"), out = path.join(tempDir("page-out"), "page");
    for (const [name, content] of Object.entries(files)) fs.writeFileSync(path.join(src, name), content);
    const assets = Object.fromEntries(Object.keys(files).filter((f) => !f.endsWith(".html")).map((f) => [f, path.join(src, f)]));
    const names = buildPage({ pages: [path.join(src, "index.html")], assets }, out);
    const read = (f) => fs.readFileSync(path.join(out, f), "utf8");
    return { names, read, listed: fs.readdirSync(path.join(out, "assets")).sort() };
  }
  const files = {
    "index.html": '<link rel="stylesheet" href="/assets/a.css"><script src="/assets/main.js"></script>',
    "main.js": 'import("/assets/lib.js");\n',
    "lib.js": "export const x = 1;\n//# sourceMappingURL=lib.js.map\n",
    "a.css": "body{color:red}\n",
  };

  test("an asset is named by the first 10 hex digits of its content's SHA-256", () => {
    assert.equal(fingerprint("duet.js", "x"), "duet.2d711642b7.js"); // sha256("x") = 2d711642b726b044…
    const { names, read, listed } = build(files);
    assert.deepEqual(listed, Object.values(names).sort());
    for (const [name, written] of Object.entries(names)) {
      assert.match(written, /^[a-z]+\.[0-9a-f]{10}\.(js|css)$/);
      assert.equal(fingerprint(name, read(`assets/${written}`)), written, `${name}: named by what was written`);
    }
    assert.equal(read("index.html"), `<link rel="stylesheet" href="/assets/${names["a.css"]}"><script src="/assets/${names["main.js"]}"></script>`);
    assert.equal(read(`assets/${names["main.js"]}`), `import("/assets/${names["lib.js"]}");\n`);
    assert.equal(read(`assets/${names["lib.js"]}`), "export const x = 1;\n", "no source map that is not served");
  });

  test("a change of content changes the name, and those of the files that load it", () => {
    const before = build(files).names;
    const after = build({ ...files, "lib.js": "export const x = 2;\n" }).names;
    assert.notEqual(after["lib.js"], before["lib.js"]);
    assert.notEqual(after["main.js"], before["main.js"], "main.js names lib.js");
    assert.equal(after["a.css"], before["a.css"]);
    assert.deepEqual(build(files).names, before, "the same content, the same names");
  });

  test("a file that loads an asset the page does not have fails the build", () => {
    assert.throws(() => build({ ...files, "main.js": 'import("/assets/missing.js");\n' }), /loads \/assets\/missing\.js, which is not one of the page's assets/);
  });

  test("the built page loads only assets that were written", () => {
    const dir = path.join(ROOT, "build/page");
    const served = new Set(fs.readdirSync(path.join(dir, "assets")));
    for (const page of ["home.html", "room.html"]) {
      const loaded = [...fs.readFileSync(path.join(dir, page), "utf8").matchAll(/\/assets\/([^"]+)/g)].map((m) => m[1]);
      assert.ok(loaded.length > 0, page);
      for (const name of loaded) assert.ok(served.has(name), `${page} loads ${name}`);
    }
  });
});

describe("the page's assets as the worker serves them", () => {
  let worker;
  before(async () => {
    worker = await startWorker({ ai: "none" });
  });
  after(async () => {
    await worker?.stop();
  });

  test("a fingerprinted asset is kept a year, with its content type; the pages are asked for afresh", async () => {
    const assets = pageAssets();
    assert.deepEqual(Object.keys(assets).sort(), ["addon-fit.js", "duet.css", "duet.js", "xterm.css", "xterm.js"]);
    for (const [name, route] of Object.entries(assets)) {
      const res = await fetch(worker.url + route);
      assert.equal(res.status, 200, route);
      assert.equal(res.headers.get("content-type"), name.endsWith(".css") ? "text/css; charset=utf-8" : "text/javascript; charset=utf-8", route);
      assert.equal(res.headers.get("cache-control"), "public, max-age=31536000, immutable", route);
      assert.equal(res.headers.get("x-content-type-options"), "nosniff", route);
      assert.equal(await res.text(), fs.readFileSync(path.join(ROOT, "build/page", route), "utf8"), route);
    }
    for (const route of ["/", "/rooms/r-1"]) {
      const res = await fetch(worker.url + route);
      assert.equal(res.headers.get("cache-control"), "no-cache", route);
      assert.match(await res.text(), /\/assets\/duet\.[0-9a-f]{10}\.js/, route);
    }
  });

  test("any other name under /assets/ is a JSON 404", async () => {
    for (const route of ["/assets/unknown.js", "/assets/duet.js", "/assets/home.html", "/assets/a..b.js", "/assets/..%2Fhome.html", "/assets/%2e%2e/home.html", "/assets/sub/duet.js", "/assets/sub%2Fduet.js", "/assets/"]) {
      const res = await worker.api("GET", route);
      assert.equal(res.status, 404, route);
      assert.equal(res.headers.get("content-type"), "application/json", route);
      assert.match(res.json.error, /^no such endpoint; supported: .*GET \/assets\/\{name\}/, route);
    }
  });
});

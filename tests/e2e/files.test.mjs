// The workspace's files end to end (GET/PUT/DELETE /api/rooms/{roomId}/files?path=P),
// relayed by the Sandbox object to a real sandboxd, which keeps every path
// inside the workspace. On the SANDBOX_URL path: round trips of text and
// binary files (every byte value, an empty file, 8 MiB exactly and one byte
// over, declared or streamed), listings, ranges of a file larger than a
// whole read may be, an overwrite that no reader sees half of, the escapes
// an attacker would try (absolute, `..`, NUL, too long, a link to `/`, a
// link inside a link, a link swapped in while requests run), deletes, the
// `file` events and the audit, a sleeping room that wakes for a read;
// roles and another site's page in token mode; and a round trip in a
// container on the real Docker engine.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import http from "node:http";
import { after, before, describe, test } from "node:test";

import { startContainerWorker } from "./support/engine.mjs";
import { first, watch } from "./support/feed.mjs";
import { untilEvent } from "./support/lifecycle.mjs";
import { bearer, exec, invite } from "./support/rooms.mjs";
import { startSandboxd, startStack, startWorker } from "./support/stack.mjs";

const MiB = 1024 * 1024;
const LIMIT = 8 * MiB;

/** A room's files on the worker at `base`, as raw bytes, with `headers` on every call. */
function files(base, room, headers = {}) {
  const url = (path, query = "") => `${base}/api/rooms/${room}/files?path=${encodeURIComponent(path)}${query}`;
  const call = async (method, path, { body, query, extra = {} } = {}) => {
    const res = await fetch(url(path, query), { method, body, headers: { ...headers, ...extra } });
    const bytes = Buffer.from(await res.arrayBuffer());
    let json;
    try {
      json = JSON.parse(bytes.toString());
    } catch {
      json = undefined;
    }
    return { status: res.status, headers: res.headers, bytes, json };
  };
  return {
    url,
    get: (path, extra) => call("GET", path, { extra }),
    put: (path, body, extra) => call("PUT", path, { body, extra: { "content-type": "application/octet-stream", ...extra } }),
    delete: (path, query = "") => call("DELETE", path, { query }),
  };
}

/**
 * A PUT that declares `length` bytes and sends none, on a connection of its
 * own: the worker refuses a declared length over the limit unread.
 */
function declaring(url, length) {
  return new Promise((resolve, reject) => {
    const headers = { connection: "close", "content-type": "application/octet-stream", "content-length": String(length) };
    const req = http.request(url, { method: "PUT", agent: false, headers }, (res) => {
      const chunks = [];
      res.on("data", (chunk) => chunks.push(chunk));
      res.on("end", () => {
        req.destroy();
        resolve({ status: res.statusCode, json: JSON.parse(Buffer.concat(chunks).toString()) });
      });
      res.on("error", reject);
    });
    req.on("error", () => {}); // destroyed once answered
    req.flushHeaders();
  });
}

/** Every byte value, `times` over. */
const everyByte = (times) => Buffer.concat(Array.from({ length: times }, () => Buffer.from(Array.from({ length: 256 }, (_, i) => i))));

describe("files (SANDBOX_URL)", () => {
  let sandboxd, worker;
  before(async () => {
    sandboxd = await startSandboxd();
    worker = await startWorker({ vars: { SANDBOX_URL: sandboxd.url, SANDBOX_IDLE_SECONDS: "2" } });
  });
  after(async () => {
    await worker.stop();
    await sandboxd.stop();
  });

  test("text and binary files go in and come out byte for byte: every byte value, empty, 8 MiB exactly; one byte over is a 413", async () => {
    const room = randomUUID();
    const on = files(worker.url, room);
    const cases = [
      ["notes/hello.txt", Buffer.from("héllo, wörld\n")],
      ["bin/every-byte", everyByte(40)],
      ["empty", Buffer.alloc(0)],
      ["big/exactly-8MiB", Buffer.alloc(LIMIT, 0xa7)],
    ];
    for (const [path, body] of cases) {
      const put = await on.put(path, body);
      assert.equal(put.status, 200, `${path}: ${put.bytes}`);
      assert.deepEqual(put.json, { path, size: body.length });
      const got = await on.get(path);
      assert.equal(got.status, 200);
      assert.equal(got.headers.get("content-type"), "application/octet-stream");
      assert.equal(got.headers.get("content-length"), String(body.length));
      assert.ok(got.bytes.equals(body), `${path} came back as written`);
    }
    // The shell sees what was written.
    const sum = await exec(worker, room, "sha256sum bin/every-byte | cut -c1-64");
    const { createHash } = await import("node:crypto");
    assert.equal(sum.json.result.stdout.trim(), createHash("sha256").update(everyByte(40)).digest("hex"));
    // One byte over: declared, refused unread; streamed without a length, cut off by sandboxd.
    const declared = await declaring(on.url("big/over"), LIMIT + 1);
    assert.equal(declared.status, 413);
    assert.equal(declared.json.error, `request body too large: the limit is ${LIMIT} bytes`);
    const streamed = await fetch(on.url("big/over"), {
      method: "PUT",
      duplex: "half",
      body: new Blob([Buffer.alloc(LIMIT + 1)]).stream(),
    });
    assert.equal(streamed.status, 413);
    assert.match((await streamed.json()).error, /8388608/);
    assert.equal((await on.get("big/over")).status, 404, "nothing of a refused body is left");
  });

  test("a directory lists its entries sorted, with their types; a missing path is a 404", async () => {
    const room = randomUUID();
    const on = files(worker.url, room);
    assert.deepEqual((await on.get("")).json, { path: "", entries: [] }, "a new room's workspace is there, empty");
    await exec(worker, room, "mkdir -p src/lib && printf abc > src/b.txt && printf x > src/a.txt && ln -s b.txt src/link");
    const listed = await on.get("src/");
    assert.equal(listed.status, 200);
    assert.equal(listed.headers.get("content-type"), "application/json");
    const entries = listed.json.entries.map(({ name, type, size }) => ({ name, type, ...(type === "file" ? { size } : {}) }));
    assert.deepEqual(entries, [
      { name: "a.txt", type: "file", size: 1 },
      { name: "b.txt", type: "file", size: 3 },
      { name: "lib", type: "dir" },
      { name: "link", type: "symlink" },
    ]);
    assert.equal(listed.json.path, "src");
    for (const e of listed.json.entries) assert.match(e.mtime, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    const missing = await on.get("src/nothing");
    assert.equal(missing.status, 404);
    assert.match(missing.json.error, /src\/nothing/);
    await exec(worker, room, "mkdir many && cd many && seq -w 1 1001 | xargs touch");
    const many = await on.get("many");
    assert.deepEqual([many.json.entries.length, many.json.truncated, many.json.entries[0].name], [1000, true, "0001"]);
  });

  test("ranges: a part answers 206 with Content-Range; a file over 8 MiB is read in parts, not whole; past its end is a 416", async () => {
    const room = randomUUID();
    const on = files(worker.url, room);
    await exec(worker, room, "head -c 9437184 /dev/urandom > big && printf 0123456789 > digits");
    const part = await on.get("digits", { range: "bytes=2-5" });
    assert.equal(part.status, 206);
    assert.equal(part.headers.get("content-range"), "bytes 2-5/10");
    assert.equal(part.bytes.toString(), "2345");
    assert.equal((await on.get("digits", { range: "bytes=-3" })).bytes.toString(), "789");
    const whole = await on.get("big");
    assert.equal(whole.status, 413);
    const parts = [];
    for (let at = 0; at < 9 * MiB; at += 4 * MiB) {
      const piece = await on.get("big", { range: `bytes=${at}-${Math.min(at + 4 * MiB, 9 * MiB) - 1}` });
      assert.equal(piece.status, 206);
      parts.push(piece.bytes);
    }
    const sum = await exec(worker, room, "sha256sum big | cut -c1-64");
    const { createHash } = await import("node:crypto");
    assert.equal(createHash("sha256").update(Buffer.concat(parts)).digest("hex"), sum.json.result.stdout.trim());
    const past = await on.get("digits", { range: "bytes=10-" });
    assert.equal(past.status, 416);
    assert.equal(past.headers.get("content-range"), "bytes */10");
    assert.equal((await on.get("digits", { range: "lines=1-2" })).status, 400);
  });

  test("an overwrite is atomic: readers meanwhile see the old file or the new one, whole", async () => {
    const room = randomUUID();
    const on = files(worker.url, room);
    const [a, b] = [Buffer.alloc(4 * MiB, "a"), Buffer.alloc(4 * MiB, "b")];
    await on.put("f", a);
    let writing = true;
    const writer = (async () => {
      for (let i = 0; i < 6; i++) assert.equal((await on.put("f", i % 2 ? a : b)).status, 200);
      writing = false;
    })();
    const seen = new Set();
    while (writing) {
      const got = await on.get("f");
      assert.equal(got.status, 200);
      assert.equal(got.bytes.length, 4 * MiB);
      const kind = got.bytes[0] === 0x61 ? a : b;
      assert.ok(got.bytes.equals(kind), "a read is one version whole");
      seen.add(got.bytes[0]);
    }
    await writer;
    assert.ok(seen.size >= 1);
  });

  test("escapes are refused: absolute, `..` out, NUL, too long (400); through a link to `/`, a link in a link, a link swapped in (403)", async () => {
    const room = randomUUID();
    const on = files(worker.url, room);
    await exec(worker, room, "mkdir -p d/e && ln -s / root && ln -s root twice && ln -s ../../.. d/e/up && ln -s /etc/passwd pw && printf ok > d/ok");
    for (const path of ["/etc/passwd", "../x", "d/../../x", "a\u0000b", "x".repeat(4097)]) {
      const got = await on.get(path);
      assert.equal(got.status, 400, `${JSON.stringify(path.slice(0, 20))}: ${got.bytes}`);
      assert.equal(typeof got.json.error, "string");
      assert.equal((await on.put(path, Buffer.from("x"))).status, 400);
    }
    assert.equal((await on.get("d/e/../../d/ok")).bytes.toString(), "ok", "`..` that stays inside is fine");
    for (const path of ["root/etc/passwd", "twice/etc/passwd", "d/e/up/x", "pw"]) {
      const got = await on.get(path);
      assert.equal(got.status, 403, `${path}: ${got.bytes}`);
      assert.match(got.json.error, /outside|leaves/);
      assert.equal((await on.put(path, Buffer.from("pwned"))).status, 403, path);
      assert.equal((await on.delete(path)).status === 403 || path === "pw", true, path);
    }
    assert.equal((await on.put("root/tmp/pwned", Buffer.from("x"))).status, 403);
    // A link swapped in for a directory while reads and writes run: none goes through it.
    const swap = "for i in $(seq 1 400); do rm -rf s; mkdir s; printf mine > s/passwd; rm -rf s; ln -s /etc s; done";
    const swapping = exec(worker, room, swap);
    const answers = [];
    for (let i = 0; i < 60; i++) {
      const got = await on.get("s/passwd");
      answers.push(got.status);
      // Empty between its creation and its write.
      if (got.status === 200) assert.match(got.bytes.toString(), /^(mine)?$/);
      const put = await on.put("s/hostname", Buffer.from("pwned"));
      answers.push(put.status);
    }
    await swapping;
    const etc = await exec(worker, room, "cat /etc/hostname");
    assert.notEqual(etc.json.result.stdout.trim(), "pwned");
    assert.ok(answers.every((s) => [200, 403, 404, 409].includes(s)), answers.join(","));
  });

  test("deletes take a file, an empty directory, a tree only when asked; each change is a `file` event and an audit entry", async () => {
    const room = randomUUID();
    const on = files(worker.url, room);
    const w = watch(worker.url, room);
    await w.opened;
    await on.put("tree/a/b.txt", Buffer.from("abc"));
    const written = await w.until(first("file"));
    assert.deepEqual(
      { ...written, seq: undefined, at: undefined },
      { type: "file", change: "written", path: "tree/a/b.txt", size: 3, source: "exec", seq: undefined, at: undefined },
    );
    await exec(worker, room, "mkdir empty");
    assert.equal((await on.delete("empty")).status, 200);
    const notEmpty = await on.delete("tree");
    assert.equal(notEmpty.status, 409);
    assert.match(notEmpty.json.error, /recursive/);
    const tree = await on.delete("tree", "&recursive=true");
    assert.deepEqual([tree.status, tree.json], [200, { path: "tree", deleted: true }]);
    assert.equal((await on.get("tree")).status, 404);
    await w.until((events) => events.filter((e) => e.type === "file").length === 3);
    assert.deepEqual(
      w.events.filter((e) => e.type === "file").map((e) => [e.change, e.path]),
      [["written", "tree/a/b.txt"], ["deleted", "empty"], ["deleted", "tree"]],
    );
    const audit = (await worker.api("GET", `/api/rooms/${room}/audit`)).json.entries;
    const changes = audit.filter((e) => e.tool).map((e) => [e.tool, e.command, e.source, e.outcome]);
    assert.deepEqual(changes, [
      ["delete_file", "tree", "exec", "ran"],
      ["delete_file", "empty", "exec", "ran"],
      ["write_file", "tree/a/b.txt", "exec", "ran"],
    ]);
    w.close();
  });

  test("a sleeping room wakes for a read, with its files", async () => {
    const room = randomUUID();
    const on = files(worker.url, room);
    await on.put("kept.txt", Buffer.from("still here"));
    await untilEvent(worker, room, "sleep", 20_000);
    const got = await on.get("kept.txt");
    assert.equal(got.status, 200, got.bytes.toString());
    assert.equal(got.bytes.toString(), "still here");
  });
});

describe("files in token mode", () => {
  const SERVICE = "service-token-for-files";
  let stack;
  before(async () => {
    stack = await startStack({ vars: { DUET_API_TOKEN: SERVICE } });
  });
  after(() => stack.stop());

  test("a watcher reads and lists but may not write or delete; a writer may, named by its token; another site's page may not write", async () => {
    const room = randomUUID();
    const base = stack.worker.url;
    const as = async (role, name) => ({ authorization: `Bearer ${(await invite(bearer(base, SERVICE), room, role, { name })).token}` });
    const [watcher, writer] = [files(base, room, await as("watcher", "wes")), files(base, room, await as("writer", "bo"))];
    const w = watch(base, room, { protocols: ["duet.v1", `duet.auth.${Buffer.from(SERVICE).toString("base64url")}`] });
    await w.opened;
    const put = await writer.put("a.txt", Buffer.from("hi"));
    assert.equal(put.status, 200);
    assert.equal((await w.until(first("file"))).changedBy, "bo");
    assert.equal((await watcher.get("a.txt")).bytes.toString(), "hi");
    assert.equal((await watcher.get("")).json.entries.length, 1);
    for (const refused of [await watcher.put("b.txt", Buffer.from("x")), await watcher.delete("a.txt")]) {
      assert.equal(refused.status, 403);
      assert.equal(refused.json.error, "this needs the writer role; the token gives watcher");
    }
    assert.equal((await files(base, room).get("a.txt")).status, 401);
    const crossSite = await writer.put("a.txt", Buffer.from("x"), { origin: "https://evil.example" });
    assert.equal(crossSite.status, 403);
    assert.match(crossSite.json.error, /cross-site/);
    assert.equal((await watcher.get("a.txt")).bytes.toString(), "hi", "nothing refused was written");
    assert.equal((await writer.delete("a.txt")).status, 200);
    w.close();
  });
});

describe("files in a container, on a Docker engine", () => {
  let stack, worker;
  before(async () => {
    stack = await startContainerWorker("files");
    ({ worker } = stack);
  });
  after(() => stack?.stop());

  test("a binary file goes into the room's container and comes back; the shell there sees it; a link out is refused", async () => {
    const room = randomUUID();
    const on = files(worker.url, room);
    const body = everyByte(64);
    const put = await on.put("data/every-byte", body);
    assert.equal(put.status, 200, put.bytes.toString());
    assert.ok((await on.get("data/every-byte")).bytes.equals(body));
    const seen = await exec(worker, room, "wc -c < data/every-byte && ln -s / out");
    assert.equal(seen.json.result.stdout.trim(), String(body.length));
    assert.equal((await on.get("out/etc/passwd")).status, 403);
  });
});

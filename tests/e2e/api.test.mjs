// Routing, errors and request limits of the built worker on workerd.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import { upgrade } from "./support/feed.mjs";
import { alone, client, startStack, startWorker } from "./support/stack.mjs";

const ROOM = "0b6e7f0e-3c1a-4a43-9d0e-6f5f2b1c9a10";

describe("routes and errors", () => {
  let worker;
  before(async () => {
    worker = await startWorker();
  });
  after(() => worker.stop());

  test("GET /health is plain ok", async () => {
    const res = await worker.api("GET", "/health");
    assert.equal(res.status, 200);
    assert.equal(res.text, "ok");
    assert.match(res.headers.get("content-type"), /^text\/plain/);
  });

  test("unknown paths are a JSON 404 naming the endpoints", async () => {
    for (const route of ["/index.html", "/nope", "/internal/rooms/r/publish", "/api/rooms", `/api/rooms/${ROOM}/other`, "/health/x"]) {
      const res = await worker.api("GET", route);
      assert.equal(res.status, 404, route);
      assert.match(res.json.error, /POST \/api\/rooms\/\{roomId\}\/message/);
      assert.match(res.json.error, /DELETE \/api\/rooms\/\{roomId\}/);
    }
    // The objects' internal routes cannot be reached from outside.
    const publish = await worker.api("POST", "/internal/rooms/r/publish", { type: "message" });
    assert.equal(publish.status, 404);
    const watching = await worker.api("PUT", "/internal/rooms/r/watching", "true");
    assert.equal(watching.status, 404);
  });

  test("known paths with the wrong method are a JSON 405 with Allow", async () => {
    const cases = [
      ["POST", "/health", "GET, HEAD"],
      ["QUERY", "/health", "GET, HEAD"],
      ["PROPFIND", `/api/rooms/${ROOM}/messages`, "GET, POST"],
      ["GET", `/api/rooms/${ROOM}/message`, "POST"],
      ["PUT", `/api/rooms/${ROOM}/messages`, "GET, POST"],
      ["GET", `/api/rooms/${ROOM}/sandbox/exec`, "POST"],
      ["POST", `/api/rooms/${ROOM}`, "DELETE"],
    ];
    for (const [method, route, allow] of cases) {
      const res = await worker.api(method, route);
      assert.equal(res.status, 405, `${method} ${route}`);
      assert.equal(res.headers.get("allow"), allow);
      assert.equal(typeof res.json.error, "string");
    }
  });

  test("room ids: UUIDs and [A-Za-z0-9._-]{1,128} work, anything else is a 400", async () => {
    for (const room of [ROOM, "a.b_c-D9", "x".repeat(128)]) {
      const res = await worker.api("GET", `/api/rooms/${room}/messages`);
      assert.equal(res.status, 200, room);
      assert.deepEqual(res.json, { messages: [] });
    }
    for (const room of ["x".repeat(129), "a%2Fb", "a%00b", "a%0Ab", "caf%C3%A9", "a%20b", "%zz"]) {
      const res = await worker.api("GET", `/api/rooms/${room}/messages`);
      assert.equal(res.status, 400, room);
      assert.ok(res.json.details.roomId.length > 0, room);
    }
    const empty = await worker.api("POST", "/api/rooms//message", { text: "hi" });
    assert.equal(empty.status, 400);
  });

  test("bad message bodies are a 400 with details per field", async () => {
    const url = `/api/rooms/${ROOM}/message`;
    const cases = [
      ["not json", undefined],
      ["", undefined],
      ["[1,2]", undefined],
      [{}, "text"],
      [{ text: "   \n" }, "text"],
      [{ text: 42 }, "text"],
      [{ text: "hi", userId: 7 }, "userId"],
      [{ text: "x".repeat(8001) }, "text"],
      [{ text: "hi", userId: "u".repeat(129) }, "userId"],
    ];
    for (const [body, field] of cases) {
      const res = await worker.api("POST", url, body);
      assert.equal(res.status, 400, JSON.stringify(body));
      assert.equal(typeof res.json.error, "string");
      if (field) assert.ok(res.json.details[field].length > 0, field);
    }
    const history = await worker.api("GET", `/api/rooms/${ROOM}/messages`);
    assert.deepEqual(history.json.messages, [], "a refused message is not stored");
  });

  test("bad exec bodies are a 400 with details", async () => {
    const url = `/api/rooms/${ROOM}/sandbox/exec`;
    for (const [body, field] of [[{}, "cmd"], [{ cmd: "" }, "cmd"], [{ cmd: ["ls"] }, "cmd"], [{ cmd: "true", timeoutMs: 0 }, "timeoutMs"]]) {
      const res = await worker.api("POST", url, body);
      assert.equal(res.status, 400, JSON.stringify(body));
      assert.ok(res.json.details[field].length > 0);
    }
    assert.equal((await worker.api("POST", url, "{")).status, 400);
  });

  test("bodies over 64 KiB are a JSON 413, declared or streamed", async () => {
    const big = JSON.stringify({ text: "x".repeat(70 * 1024) });
    const declared = await alone(worker.url, "POST", `/api/rooms/${ROOM}/message`, big);
    assert.equal(declared.status, 413);
    assert.match(declared.json.error, /65536/);

    const fits = await worker.api("POST", `/api/rooms/${ROOM}/message`, JSON.stringify({ text: "ok", pad: "y".repeat(60 * 1024) }));
    assert.equal(fits.status, 200);

    // Last: a body refused half-sent ends its connection, which the client
    // would otherwise try to reuse for a next request. Its last chunk is the
    // one over the limit, so that the client is not still writing when the
    // connection ends (which a loaded machine turns into a failed fetch).
    const chunks = new ReadableStream({
      start(controller) {
        for (let i = 0; i < 65; i++) controller.enqueue(new TextEncoder().encode("x".repeat(1024)));
        controller.close();
      },
    });
    const res = await fetch(`${worker.url}/api/rooms/${ROOM}/sandbox/exec`, { method: "POST", body: chunks, duplex: "half", headers: { "content-type": "application/json" } });
    assert.equal(res.status, 413);
    assert.match((await res.json()).error, /too large/);
  });
});

describe("cross-site requests", () => {
  let stack, worker;
  before(async () => {
    stack = await startStack();
    worker = stack.worker;
  });
  after(() => stack.stop());
  const EVIL = "https://evil.example";

  test("JSON routes take only application/json (parameters allowed); anything else is a JSON 415", async () => {
    const room = `/api/rooms/${ROOM}-type`;
    for (const [route, body] of [["/message", { text: "hi" }], ["/messages", { text: "hi" }], ["/sandbox/exec", { cmd: "echo hi" }]]) {
      for (const type of ["text/plain", "text/plain;charset=UTF-8", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", "application/jsonx"]) {
        const res = await worker.api("POST", room + route, body, { "content-type": type });
        assert.equal(res.status, 415, `${route} ${type}`);
        assert.match(res.json.error, /Content-Type: application\/json/);
      }
      const bare = await fetch(worker.url + room + route, { method: "POST", body: new TextEncoder().encode(JSON.stringify(body)) });
      assert.equal(bare.status, 415, `${route} without a content type`);
      const utf8 = await worker.api("POST", room + route, body, { "content-type": "application/json; charset=utf-8" });
      assert.equal(utf8.status, 200, `${route}: ${utf8.text}`);
    }
    const history = await worker.api("GET", `${room}/messages`);
    assert.equal(history.json.messages.length, 4, "only the JSON messages were taken");
  });

  test("another site's Origin is a JSON 403 on what changes a room; no Origin or the worker's own is fine", async () => {
    const room = `/api/rooms/${ROOM}-origin`;
    const changes = [["POST", "/message", { text: "hi" }], ["POST", "/messages", { text: "hi" }], ["POST", "/sandbox/exec", { cmd: "touch pwned" }], ["DELETE", "", undefined]];
    for (const [method, route, body] of changes) {
      for (const origin of [EVIL, "null", `${worker.url}.evil.example`, worker.url.replace("127.0.0.1", "localhost")]) {
        const res = await worker.api(method, room + route, body, { origin });
        assert.equal(res.status, 403, `${method} ${route} from ${origin}`);
        assert.match(res.json.error, /cross-site request refused/);
      }
    }
    const ls = await worker.api("POST", `${room}/sandbox/exec`, { cmd: "ls" });
    assert.equal(ls.json.result.stdout, "", "the refused command did not run");
    assert.deepEqual((await worker.api("GET", `${room}/messages`)).json.messages, []);
    for (const [method, route, body] of changes) {
      const own = await worker.api(method, room + route, body, { origin: worker.url });
      assert.equal(own.status, 200, `${method} ${route} from the worker's own page: ${own.text}`);
    }
    // Reading changes nothing, and the browser keeps the answer from the other page.
    assert.equal((await worker.api("GET", `${room}/messages`, undefined, { origin: EVIL })).status, 200);
  });
});

describe("DNS rebinding: only the worker's own hosts are served", () => {
  // A page on attacker.example whose name now resolves to this machine:
  // its requests carry its own name as Host, and its own origin.
  let stack, worker;
  before(async () => {
    stack = await startStack();
    worker = stack.worker;
  });
  after(() => stack.stop());

  test("open mode: a foreign Host is a JSON 421 on every /api/ route and the feed, before anything runs", async () => {
    const port = new URL(worker.url).port;
    const room = `/api/rooms/${ROOM}-rebind`;
    const marker = await worker.api("POST", `${room}/sandbox/exec`, { cmd: "echo kept > marker" });
    assert.equal(marker.status, 200, marker.text);
    for (const host of [`attacker.example:${port}`, `localhost.attacker.example:${port}`, `127.0.0.1.attacker.example:${port}`]) {
      const origin = `http://${host}`;
      for (const [method, route, body] of [["POST", "/sandbox/exec", { cmd: "touch pwned" }], ["DELETE", "", undefined], ["POST", "/message", { text: "hi" }], ["GET", "/messages", undefined], ["GET", "/policy", undefined]]) {
        const res = await alone(worker.url, method, room + route, body, { host, origin });
        assert.equal(res.status, 421, `${method} ${route} at ${host}: ${res.text}`);
        assert.match(res.json.error, new RegExp(`does not answer at ${host.replaceAll(".", "\\.")}.*DUET_HOSTS`));
      }
      const feed = await upgrade(worker.url, `${ROOM}-rebind`, { host, origin, "sec-websocket-protocol": "duet.v1" });
      assert.equal(feed.status, 421, `the feed at ${host}`);
    }
    const ls = await worker.api("POST", `${room}/sandbox/exec`, { cmd: "ls; cat marker" });
    assert.equal(ls.json.result.stdout, "marker\nkept\n", "nothing ran and the room was not deleted");
    // The loopback names stay the worker's own, each with its own origin.
    for (const host of [`localhost:${port}`, `127.0.0.1:${port}`]) {
      const res = await alone(worker.url, "POST", `${room}/sandbox/exec`, { cmd: "true" }, { host, origin: `http://${host}` });
      assert.equal(res.status, 200, `${host}: ${res.text}`);
    }
    assert.equal((await alone(worker.url, "GET", "/health", undefined, { host: `attacker.example:${port}` })).status, 200, "health needs no host");
  });

  test("token mode and DUET_HOSTS: only the listed hosts, and an Origin judged against them, not against Host", async () => {
    const listed = await startWorker({ access: "token", vars: { SANDBOX_URL: stack.sandboxd.url, DUET_API_TOKEN: "t0ken-for-tests", DUET_HOSTS: "duet.example.com, duet.acme.workers.dev" } });
    try {
      const auth = { authorization: "Bearer t0ken-for-tests" };
      const room = `/api/rooms/${ROOM}-hosts/sandbox/exec`;
      // Refused before the body is read, so on a connection of its own (see `alone`).
      const local = await alone(listed.url, "POST", room, { cmd: "true" }, auth);
      assert.equal(local.status, 421, "a loopback name is not listed");
      assert.match(local.json.error, /duet\.example\.com, duet\.acme\.workers\.dev/);
      const attacker = await alone(listed.url, "POST", room, { cmd: "true" }, { ...auth, host: "attacker.example" });
      assert.equal(attacker.status, 421);
      for (const host of ["duet.example.com", "DUET.acme.workers.dev"]) {
        const res = await alone(listed.url, "POST", room, { cmd: "true" }, { ...auth, host, origin: `https://${host}` });
        assert.equal(res.status, 200, `${host}: ${res.text}`);
      }
      // The request's own Host is no proof: an Origin must be a listed host over https.
      for (const origin of ["http://duet.example.com", "https://attacker.example", "https://duet.example.com:8443"]) {
        const res = await alone(listed.url, "POST", room, { cmd: "true" }, { ...auth, host: "duet.example.com", origin });
        assert.equal(res.status, 403, origin);
      }
    } finally {
      await listed.stop();
    }
  });
});

describe("optional bearer token", () => {
  let worker;
  before(async () => {
    worker = await startWorker({ vars: { DUET_API_TOKEN: "t0ken-for-tests" } });
  });
  after(() => worker.stop());

  test("/api/ needs the token, /health does not", async () => {
    assert.equal((await worker.api("GET", "/health")).status, 200);
    for (const auth of [undefined, "Bearer wrong", "t0ken-for-tests", "Bearer t0ken-for-test"]) {
      const headers = auth ? { authorization: auth } : {};
      const res = await worker.api("GET", `/api/rooms/${ROOM}/messages`, undefined, headers);
      assert.equal(res.status, 401, String(auth));
      assert.match(res.json.error, /token/);
    }
    const authed = client(worker.url, { authorization: "Bearer t0ken-for-tests" });
    assert.equal((await authed("GET", `/api/rooms/${ROOM}/messages`)).status, 200);
    assert.equal((await authed("POST", `/api/rooms/${ROOM}/message`, { text: "hi" })).status, 200);
  });
});

// Who may do what in a room, on the built worker in token mode: the three
// roles of room tokens on every route and on the live feed, the service
// token as an owner everywhere, tokens of another room, expiry, revocation
// (connected sockets included, within a second), tampering with any bit of
// a token, and which token the objects read. Then the
// deployment's modes: the shipped token mode without a token, open mode by
// name, and the key tokens are signed with.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, describe, test } from "node:test";

import { closing, first, protocols, upgrade, watch } from "./support/feed.mjs";
import { bearer, invite } from "./support/rooms.mjs";
import { startStack, startWorker } from "./support/stack.mjs";
import { sleep } from "./support/wait.mjs";

const SERVICE = "service-t0ken";
const RANK = { watcher: 0, writer: 1, owner: 2 };
const b64 = (bytes) => Buffer.from(bytes).toString("base64url");

/** Every public room route: the role it needs, and its answer when allowed. */
const ROUTES = [
  { name: "POST /message", needs: "writer", ok: 200, call: (api, r) => api("POST", `/api/rooms/${r}/message`, { text: "hi" }) },
  { name: "POST /messages", needs: "writer", ok: 200, call: (api, r) => api("POST", `/api/rooms/${r}/messages`, { text: "hi again" }) },
  { name: "GET /messages", needs: "watcher", ok: 200, call: (api, r) => api("GET", `/api/rooms/${r}/messages`) },
  { name: "POST /sandbox/exec", needs: "writer", ok: 200, call: (api, r) => api("POST", `/api/rooms/${r}/sandbox/exec`, { cmd: "echo ran" }) },
  // No archive is kept: allowed, the route answers that it has none.
  { name: "GET /sandbox/archive", needs: "writer", ok: 404, call: (api, r) => api("GET", `/api/rooms/${r}/sandbox/archive`) },
  { name: "GET /policy", needs: "watcher", ok: 200, call: (api, r) => api("GET", `/api/rooms/${r}/policy`) },
  { name: "PUT /policy", needs: "owner", ok: 200, call: (api, r) => api("PUT", `/api/rooms/${r}/policy`, { deny: ["shutdown"] }) },
  { name: "GET /approvals", needs: "watcher", ok: 200, call: (api, r) => api("GET", `/api/rooms/${r}/approvals`) },
  // No such approval: allowed, the route answers that it has none.
  { name: "POST /approvals/{id}", needs: "writer", ok: 404, call: (api, r) => api("POST", `/api/rooms/${r}/approvals/999`, { decision: "approve" }) },
  { name: "GET /audit", needs: "owner", ok: 200, call: (api, r) => api("GET", `/api/rooms/${r}/audit`) },
  { name: "POST /invites", needs: "owner", ok: 200, call: (api, r) => api("POST", `/api/rooms/${r}/invites`, { role: "watcher" }) },
  // Without an upgrade: every check passed, it is told to upgrade.
  { name: "GET /live", needs: "watcher", ok: 426, call: (api, r) => api("GET", `/api/rooms/${r}/live`) },
  // These two last: they end the room's tokens.
  { name: "DELETE /invites", needs: "owner", ok: 200, call: (api, r) => api("DELETE", `/api/rooms/${r}/invites`) },
  { name: "DELETE /api/rooms/{roomId}", needs: "owner", ok: 200, call: (api, r) => api("DELETE", `/api/rooms/${r}`) },
];

describe("roles in token mode", () => {
  let stack, worker;
  const as = (token) => bearer(worker.url, token);
  before(async () => {
    stack = await startStack({ vars: { DUET_API_TOKEN: SERVICE } });
    worker = stack.worker;
  });
  after(() => stack.stop());

  test("an invite answers its token, role, expiry and a link with the token in the fragment", async () => {
    const room = randomUUID();
    const before = Date.now();
    const made = await invite(as(SERVICE), room, "writer", { ttlSeconds: 600, name: "bo" });
    assert.deepEqual(Object.keys(made).sort(), ["expiresAt", "link", "role", "token"]);
    assert.equal(made.role, "writer");
    assert.match(made.token, /^duet1\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]{43}$/);
    assert.ok(made.expiresAt >= before + 600_000 && made.expiresAt <= Date.now() + 600_000, `${made.expiresAt}`);
    assert.equal(made.link, `${worker.url}/rooms/${room}#token=${made.token}`);
    assert.ok(!worker.logs.some((line) => line.includes(made.token)), "no log line holds the token");
    const bad = await as(SERVICE)("POST", `/api/rooms/${room}/invites`, { role: "admin", ttlSeconds: 0 });
    assert.equal(bad.status, 400);
    assert.deepEqual(Object.keys(bad.json.details).sort(), ["role", "ttlSeconds"]);
  });

  test("every role on every route: allowed at or above its role, a 403 naming the role below it", async () => {
    for (const role of ["watcher", "writer", "owner"]) {
      const room = randomUUID();
      let { token } = await invite(as(SERVICE), room, role);
      for (const route of ROUTES) {
        const res = await route.call(as(token), room);
        if (RANK[role] >= RANK[route.needs]) {
          assert.equal(res.status, route.ok, `${role} ${route.name}: ${res.text}`);
          // Revoking ended the owner's own token; it goes on with the new one.
          if (route.name === "DELETE /invites") token = res.json.invite.token;
        } else {
          assert.equal(res.status, 403, `${role} ${route.name}: ${res.text}`);
          assert.equal(res.json.error, `this needs the ${route.needs} role; the token gives ${role}`);
        }
      }
    }
  });

  test("a room token's name stands in the audit and on the feed; a userId beside it is self-declared; refusals by role are audited", async () => {
    const room = randomUUID();
    const { token: bo } = await invite(as(SERVICE), room, "writer", { name: "bo" });
    const { token: vi } = await invite(as(SERVICE), room, "watcher", { name: "vi" });
    const seen = watch(worker.url, room, { protocols: protocols(SERVICE) });
    await seen.until(first("hello"));
    const ran = await as(bo)("POST", `/api/rooms/${room}/sandbox/exec`, { cmd: "echo by-bo", userId: "ana (owner)" });
    assert.equal(ran.status, 200, ran.text);
    const started = await seen.until((events) => events.find((e) => e.type === "command" && e.cmd === "echo by-bo"));
    assert.equal(started.askedBy, 'bo (says "ana (owner)")');
    const refused = await as(vi)("POST", `/api/rooms/${room}/sandbox/exec`, { cmd: "touch by-vi", userId: "bo" });
    assert.equal(refused.status, 403, refused.text);
    assert.equal(refused.json.error, "this needs the writer role; the token gives watcher");
    // The service token's server names its own users: its userId is taken as sent.
    const served = await as(SERVICE)("POST", `/api/rooms/${room}/sandbox/exec`, { cmd: "ls", userId: "ana" });
    assert.equal(served.json.result.stdout, "", "the watcher's command did not run");
    const audit = (await as(SERVICE)("GET", `/api/rooms/${room}/audit`)).json.entries;
    const entry = (command) => audit.find((e) => e.command === command);
    assert.equal(entry("echo by-bo").askedBy, 'bo (says "ana (owner)")');
    assert.equal(entry("echo by-bo").outcome, "ran");
    assert.equal(entry("touch by-vi").askedBy, "vi", "the token's name, not the userId it sent");
    assert.equal(entry("touch by-vi").outcome, "refused");
    assert.equal(entry("ls").askedBy, "ana");
    // A decision is named the same way.
    assert.equal((await as(SERVICE)("PUT", `/api/rooms/${room}/policy`, { agentCommands: "ask" })).status, 200);
    const asked = await as(SERVICE)("POST", `/api/rooms/${room}/message`, { text: "steps echo approved", userId: "ana" });
    assert.equal(asked.status, 200, asked.text);
    const [waiting] = asked.json.approvals;
    const decided = await as(bo)("POST", `/api/rooms/${room}/approvals/${waiting.id}`, { decision: "approve", userId: "cleo" });
    assert.equal(decided.status, 200, decided.text);
    assert.equal(decided.json.approval.decidedBy, 'bo (says "cleo")');
    seen.close();
  });

  test("the service token is an owner in every room; no token is a 401 everywhere", async () => {
    const room = randomUUID();
    for (const route of ROUTES) {
      const res = await route.call(as(SERVICE), room);
      assert.equal(res.status, route.ok, `${route.name}: ${res.text}`);
      if (route.name === "DELETE /invites") assert.deepEqual(res.json, { revoked: true }, "nothing to hand back");
      const none = await route.call(as(), room);
      assert.equal(none.status, 401, route.name);
      assert.equal(none.json.error, "missing or wrong bearer token");
    }
  });

  test("every role watches the feed, told its role and name; only writers and owners name themselves", async () => {
    const room = randomUUID();
    const tokens = {};
    for (const role of ["watcher", "writer", "owner"]) tokens[role] = (await invite(as(SERVICE), room, role, role === "watcher" ? { name: "ana" } : {})).token;
    const service = watch(worker.url, room, { protocols: protocols(SERVICE) });
    const hello = await service.until(first("hello"));
    assert.deepEqual([hello.role, hello.name, hello.invites], ["owner", undefined, true]);
    const sockets = {};
    for (const role of ["watcher", "writer", "owner"]) {
      sockets[role] = watch(worker.url, room, { protocols: protocols(tokens[role]) });
      const h = await sockets[role].until(first("hello"));
      assert.deepEqual([h.role, h.invites], [role, role === "owner"], role);
    }
    assert.equal((await sockets.watcher.until(first("hello"))).name, "ana");
    sockets.writer.ws.send(JSON.stringify({ type: "name", name: "\u001b[1mbo " }));
    const named = (events) => events.filter((e) => e.type === "presence").find((e) => e.watchers.some((w) => w.name === "bo"));
    const presence = await service.until(named);
    assert.deepEqual(presence.watchers.map((w) => `${w.role}:${w.name ?? ""}`).sort(), ["owner:", "owner:", "watcher:ana", "writer:bo"]);

    // A watcher that names itself is refused: its name is its invite's.
    const renaming = watch(worker.url, room, { protocols: protocols(tokens.watcher) });
    await renaming.until(first("hello"));
    renaming.ws.send(JSON.stringify({ type: "name", name: "mallory" }));
    await renaming.until(closing(renaming));
    if (renaming.closed()) assert.equal(renaming.closed().code, 4403);
    // And one that sends a command is closed: commands go over HTTP.
    sockets.watcher.ws.send(JSON.stringify({ type: "exec", cmd: "touch pwned" }));
    await sockets.watcher.until(closing(sockets.watcher));
    if (sockets.watcher.closed()) assert.equal(sockets.watcher.closed().code, 1008);
    const ls = await as(SERVICE)("POST", `/api/rooms/${room}/sandbox/exec`, { cmd: "ls" });
    assert.equal(ls.json.result.stdout, "", "no command of the watcher ran");
    // Acknowledging is what a watcher may do: the writer, which acks, stays.
    for (const w of [sockets.writer, sockets.owner, service]) {
      await w.until((events) => events.find((e) => e.type === "command_end"));
      assert.equal(w.closed(), null);
      w.close();
    }
  });

  test("a token of one room is refused in every other room, on every route and the feed", async () => {
    const [mine, other] = [randomUUID(), randomUUID()];
    const { token } = await invite(as(SERVICE), mine, "owner");
    for (const route of ROUTES) {
      const res = await route.call(as(token), other);
      assert.equal(res.status, 401, route.name);
      assert.equal(res.json.error, "the token is for another room");
    }
    const refused = await upgrade(worker.url, other, { "Sec-WebSocket-Protocol": protocols(token).join(", ") });
    assert.equal(refused.status, 401, refused.head);
    assert.equal((await as(token)("GET", `/api/rooms/${mine}/messages`)).status, 200, "its own room takes it");
  });

  test("a token expires: refused after its time, and its socket closed at the next event", async () => {
    const room = randomUUID();
    const made = await invite(as(SERVICE), room, "writer", { ttlSeconds: 2 });
    assert.equal((await as(made.token)("GET", `/api/rooms/${room}/messages`)).status, 200);
    const w = watch(worker.url, room, { protocols: protocols(made.token) });
    await w.until(first("hello"));
    await sleep(made.expiresAt - Date.now() + 50);
    const late = await as(made.token)("POST", `/api/rooms/${room}/sandbox/exec`, { cmd: "true" });
    assert.equal(late.status, 401);
    assert.equal(late.json.error, "the token has expired: ask the room's owner for a new link");
    const refused = await upgrade(worker.url, room, { "Sec-WebSocket-Protocol": protocols(made.token).join(", ") });
    assert.equal(refused.status, 401);
    assert.equal(w.closed(), null, "open until an event comes");
    await as(SERVICE)("POST", `/api/rooms/${room}/sandbox/exec`, { cmd: "true" });
    const closed = await w.until(first("closed"));
    assert.equal(closed.reason, "token_expired");
    assert.ok(!w.events.some((e) => e.type === "command"), "it saw nothing after its expiry");
    await w.until(closing(w));
    if (w.closed()) assert.equal(w.closed().code, 4401);
  });

  test("revoking ends every room token at once, connected sockets within a second (hibernated ones too), not the service token", async () => {
    const room = randomUUID();
    const watcher = (await invite(as(SERVICE), room, "watcher")).token;
    const writer = (await invite(as(SERVICE), room, "writer")).token;
    const sockets = [watch(worker.url, room, { protocols: protocols(watcher) }), watch(worker.url, room, { protocols: protocols(writer) })];
    const service = watch(worker.url, room, { protocols: protocols(SERVICE) });
    for (const w of [...sockets, service]) await w.until(first("hello"));
    // The sockets outlive their object's eviction, and so does what they may do.
    await worker.evict("Sandbox", `sandbox-${room}`);
    const started = Date.now();
    const res = await as(SERVICE)("DELETE", `/api/rooms/${room}/invites`);
    assert.deepEqual([res.status, res.json], [200, { revoked: true }]);
    for (const w of sockets) {
      const closed = await w.until(first("closed"), 1000);
      assert.equal(closed.reason, "revoked");
      await w.until(closing(w), 1000 - (Date.now() - started));
      assert.ok(Date.now() - started < 1000, `closed after ${Date.now() - started} ms`);
    }
    for (const token of [watcher, writer]) {
      const history = await as(token)("GET", `/api/rooms/${room}/messages`);
      assert.equal(history.status, 401);
      assert.match(history.json.error, /^the token was revoked/);
      const refused = await upgrade(worker.url, room, { "Sec-WebSocket-Protocol": protocols(token).join(", ") });
      assert.equal(refused.status, 401);
    }
    const exec = await as(writer)("POST", `/api/rooms/${room}/sandbox/exec`, { cmd: "true" });
    assert.equal(exec.status, 401, "the Sandbox object knows the new generation too");
    await service.until((events) => events.filter((e) => e.type === "presence").at(-1)?.watchers.length === 1);
    assert.equal(service.closed(), null);
    service.close();
    const again = await invite(as(SERVICE), room, "writer");
    assert.equal((await as(again.token)("POST", `/api/rooms/${room}/sandbox/exec`, { cmd: "true" })).status, 200, "new invites work");
  });

  test("an owner's token: what it makes lasts no longer than it, and revoking with it hands back a new one", async () => {
    const room = randomUUID();
    const owner = await invite(as(SERVICE), room, "owner", { ttlSeconds: 60, name: "olga" });
    const made = await invite(as(owner.token), room, "watcher", { ttlSeconds: 86400 });
    assert.equal(made.expiresAt, owner.expiresAt);
    const res = await as(owner.token)("DELETE", `/api/rooms/${room}/invites`);
    assert.equal(res.status, 200);
    assert.deepEqual([res.json.revoked, res.json.invite.role, res.json.invite.expiresAt], [true, "owner", owner.expiresAt]);
    assert.equal((await as(owner.token)("GET", `/api/rooms/${room}/messages`)).status, 401, "the old one is revoked");
    assert.equal((await as(made.token)("GET", `/api/rooms/${room}/messages`)).status, 401);
    const renewed = res.json.invite.token;
    assert.equal((await as(renewed)("POST", `/api/rooms/${room}/invites`, { role: "writer" })).status, 200);
    const w = watch(worker.url, room, { protocols: protocols(renewed) });
    assert.equal((await w.until(first("hello"))).name, "olga");
    w.close();
  });

  test("deleting the room ends its tokens, and a room made afresh under its id takes none of them", async () => {
    const room = randomUUID();
    const { token } = await invite(as(SERVICE), room, "writer");
    assert.equal((await as(SERVICE)("DELETE", `/api/rooms/${room}`)).status, 200);
    assert.equal((await as(token)("POST", `/api/rooms/${room}/sandbox/exec`, { cmd: "true" })).status, 401);
    await invite(as(SERVICE), room, "writer");
    assert.equal((await as(token)("GET", `/api/rooms/${room}/messages`)).status, 401);
  });

  test("one flipped bit anywhere in a token, or any part cut off, is a 401", async () => {
    const room = randomUUID();
    const { token } = await invite(as(SERVICE), room, "watcher");
    const bytes = Buffer.from(token);
    // Through the feed's URL without an upgrade: the token as a subprotocol
    // carries any byte; a valid one passes every check and is told to upgrade.
    const live = (offered) => fetch(`${worker.url}/api/rooms/${room}/live`, { headers: { "sec-websocket-protocol": protocols(offered).join(", ") } }).then((r) => r.status);
    const history = (offered) => fetch(`${worker.url}/api/rooms/${room}/messages`, { headers: { authorization: `Bearer ${offered}` } }).then((r) => r.status);
    assert.equal(await live(bytes), 426);
    assert.equal(await history(token), 200);
    const wrong = [];
    for (let i = 0; i < bytes.length; i++) {
      for (let bit = 0; bit < 8; bit++) {
        const flipped = Buffer.from(bytes);
        flipped[i] ^= 1 << bit;
        if ((await live(flipped)) !== 401) wrong.push(`byte ${i} bit ${bit} (live)`);
        // As a header, where the flipped byte is one a header may carry.
        if (flipped[i] > 0x20 && flipped[i] < 0x7f && (await history(flipped.toString())) !== 401) wrong.push(`byte ${i} bit ${bit}`);
      }
    }
    // The MAC's last character carries two bits beyond its bytes: the same
    // MAC written with them set is another text, refused too.
    const ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    const last = ALPHABET.indexOf(token.at(-1));
    assert.equal(last % 4, 0, "a canonical last character");
    for (let extra = 1; extra < 4; extra++) {
      const otherwise = token.slice(0, -1) + ALPHABET[last + extra];
      assert.deepEqual(Buffer.from(otherwise.split(".")[2], "base64url"), Buffer.from(token.split(".")[2], "base64url"));
      if ((await history(otherwise)) !== 401) wrong.push(`last character written otherwise (+${extra})`);
    }
    for (let n = 0; n < token.length; n++) {
      if ((await history(token.slice(0, n))) !== 401) wrong.push(`cut to ${n}`);
      if ((await history(token.slice(n + 1))) !== 401) wrong.push(`cut from ${n + 1}`);
    }
    assert.deepEqual(wrong, []);
  });

  test("the room's objects take the claims of the very token the front door checked", async () => {
    const room = randomUUID();
    const { token } = await invite(as(SERVICE), room, "watcher");
    const [head, payload, mac] = token.split(".");
    const claims = JSON.parse(Buffer.from(payload, "base64url"));
    // A room token of a stale generation beside the service token: the
    // bearer is the one checked, and the one an object reads.
    const stale = [head, b64(JSON.stringify({ ...claims, gen: "g-stale" })), mac].join(".");
    const res = await as(SERVICE)("GET", `/api/rooms/${room}/messages`, undefined, { "sec-websocket-protocol": protocols(stale).join(", ") });
    assert.equal(res.status, 200, res.text);
    // And the service token offered beside a watcher's bearer raises nothing.
    const exec = await as(token)("POST", `/api/rooms/${room}/sandbox/exec`, { cmd: "true" }, { "sec-websocket-protocol": protocols(SERVICE).join(", ") });
    assert.equal(exec.status, 403);
  });
});

describe("access modes", () => {
  test("the shipped wrangler.toml is token mode: without DUET_API_TOKEN the API is a 503 saying so", async () => {
    const worker = await startWorker({ access: null, ai: "none" });
    try {
      const res = await worker.api("GET", `/api/rooms/${randomUUID()}/messages`);
      assert.equal(res.status, 503);
      assert.match(res.json.error, /DUET_API_TOKEN is not set/);
      assert.equal((await worker.api("GET", "/health")).status, 200);
      assert.equal((await worker.api("GET", "/rooms/r")).status, 200, "the page loads, and shows the error");
    } finally {
      await worker.stop();
    }
  });

  test("a DUET_ACCESS that is neither open nor token is a 503 naming it", async () => {
    const worker = await startWorker({ access: "opne", ai: "none" });
    try {
      const res = await worker.api("GET", `/api/rooms/${randomUUID()}/messages`);
      assert.equal(res.status, 503);
      assert.match(res.json.error, /DUET_ACCESS is "opne"/);
    } finally {
      await worker.stop();
    }
  });

  test("open by name: no token, one warning per isolate, everyone an owner, invites a 409", async () => {
    const worker = await startWorker({ ai: "none" });
    try {
      const room = randomUUID();
      for (let i = 0; i < 3; i++) assert.equal((await worker.api("GET", `/api/rooms/${room}/messages`)).status, 200);
      const invite = await worker.api("POST", `/api/rooms/${room}/invites`, { role: "watcher" });
      assert.equal(invite.status, 409);
      assert.match(invite.json.error, /open/);
      assert.equal((await worker.api("DELETE", `/api/rooms/${room}/invites`)).status, 409);
      const w = watch(worker.url, room);
      assert.deepEqual(await w.until(first("hello")).then((h) => [h.role, h.invites]), ["owner", false]);
      w.close();
      const warnings = worker.logs.filter((line) => line.includes('"event":"open-access"'));
      assert.equal(warnings.length, 1, worker.logs.join("\n"));
      assert.match(JSON.parse(warnings[0]).message, /run commands in its sandbox/);
    } finally {
      await worker.stop();
    }
  });

  test("tokens are signed with DUET_TOKEN_KEY when set, else with a key derived from DUET_API_TOKEN", async () => {
    const room = randomUUID();
    const tokenOf = async (worker, service) => (await bearer(worker.url, service)("POST", `/api/rooms/${room}/invites`, { role: "watcher" })).json.token;
    const historyWith = async (worker, token) => (await bearer(worker.url, token)("GET", `/api/rooms/${room}/messages`)).status;
    // A new service token ends the tokens of a derived key...
    let worker = await startWorker({ ai: "none", vars: { DUET_API_TOKEN: "one" } });
    const derived = await tokenOf(worker, "one");
    await worker.stop();
    worker = await startWorker({ ai: "none", persistDir: worker.persistDir, vars: { DUET_API_TOKEN: "two" } });
    try {
      assert.equal(await historyWith(worker, derived), 401);
    } finally {
      await worker.stop();
    }
    // ...but not those of a key of their own.
    worker = await startWorker({ ai: "none", persistDir: worker.persistDir, vars: { DUET_API_TOKEN: "two", DUET_TOKEN_KEY: "k3y" } });
    const keyed = await tokenOf(worker, "two");
    assert.equal(await historyWith(worker, keyed), 200);
    await worker.stop();
    worker = await startWorker({ ai: "none", persistDir: worker.persistDir, vars: { DUET_API_TOKEN: "three", DUET_TOKEN_KEY: "k3y" } });
    try {
      assert.equal(await historyWith(worker, keyed), 200);
      assert.equal(await historyWith(worker, derived), 401);
    } finally {
      await worker.stop();
    }
  });
});

// What a hostile or careless client, model or command must not be able to do:
// bring back a cleaned-up room, read secrets or echoed text in errors and
// logs, trip the body reader, paint other people's terminals, or get a room
// stuck on its own history.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import net from "node:net";
import { after, before, describe, test } from "node:test";

import { startFakeOpenAi } from "./support/fake-openai.mjs";
import { LIMITS } from "./support/limits.mjs";
import { pageAssets, startStack, startWorker } from "./support/stack.mjs";
import { sleep } from "./support/wait.mjs";
const ESC = "\u001b";
/** Any C0/C1 control but newline and tab: what chat text must never carry. */
const CONTROL = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/;

/** Writes raw bytes to the worker and answers what came back, as text. */
function raw(url, bytes, { hangUp = false } = {}) {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(port), hostname, () => {
      socket.write(bytes);
      if (hangUp) setTimeout(() => socket.destroy(), 100);
    });
    let answer = "";
    socket.setEncoding("utf8");
    socket.on("data", (chunk) => (answer += chunk));
    socket.on("close", () => resolve(answer));
    socket.on("error", reject);
    socket.setTimeout(10_000, () => socket.destroy(new Error("no answer within 10 s")));
  });
}

describe("hostile input", () => {
  let stack, worker;
  before(async () => {
    stack = await startStack();
    worker = stack.worker;
  });
  after(() => stack.stop());
  const room = () => `/api/rooms/${randomUUID()}`;

  test("cleanup is final: an exchange in flight during DELETE stores nothing and runs nothing", async () => {
    const r = room();
    await worker.api("POST", `${r}/sandbox/exec`, { cmd: "echo before > before.txt" });
    const inFlight = worker.api("POST", `${r}/message`, { text: "slow 800 on it <run>echo leftover > left.txt</run>" });
    await sleep(200);
    const cleaned = await worker.api("DELETE", r);
    assert.equal(cleaned.status, 200, cleaned.text);
    const late = await inFlight;
    assert.equal(late.status, 409, late.text);
    assert.match(late.json.error, /cleaned up while this request was in flight/);
    assert.deepEqual((await worker.api("GET", `${r}/messages`)).json.messages, []);
    const ls = await worker.api("POST", `${r}/sandbox/exec`, { cmd: "ls -A" });
    assert.equal(ls.json.result.stdout, "", "neither the old files nor the in-flight command's");
  });

  test("a Content-Length of 4 GiB or more is refused at once", async () => {
    for (const length of ["65537", "4294967295", "4294967296", "1099511627776"]) {
      const answer = await raw(worker.url, `POST /api/rooms/r1/message HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: ${length}\r\nConnection: close\r\n\r\n{`);
      assert.match(answer, /^HTTP\/1\.1 413 /, `${length}: ${answer.slice(0, 80)}`);
    }
  });

  test("a malformed chunked body is a JSON 400", async () => {
    const answer = await raw(worker.url, "POST /api/rooms/r1/message HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\nzz\r\nnot a chunk\r\n0\r\n\r\n");
    assert.match(answer, /^HTTP\/1\.1 400 /, answer.slice(0, 200));
    assert.match(answer, /"error":"[^"]+"/);
  });

  test("a client that hangs up mid-body is not logged as a server error", async () => {
    const before = worker.logs.length;
    await raw(worker.url, "POST /api/rooms/hangup/message HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"text\": \"partial", { hangUp: true });
    await sleep(500);
    const lines = worker.logs.slice(before).map((line) => JSON.parse(line)).filter((l) => l.room === "hangup");
    assert.ok(lines.length > 0, "the request is logged");
    for (const line of lines) assert.ok(line.status < 500, JSON.stringify(line));
  });

  test("HEAD /health answers 200", async () => {
    const res = await fetch(`${worker.url}/health`, { method: "HEAD" });
    assert.equal(res.status, 200);
    const wrong = await fetch(`${worker.url}/health`, { method: "POST" });
    assert.equal(wrong.headers.get("allow"), "GET, HEAD");
  });

  test("HEAD of the page's parts answers as GET, without the body", async () => {
    const assets = pageAssets();
    for (const [route, type] of [["/", "text/html"], ["/rooms/r-1", "text/html"], [assets["duet.js"], "text/javascript"], [assets["duet.css"], "text/css"]]) {
      const answer = await raw(worker.url, `HEAD ${route} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n`);
      const [head, body] = answer.split("\r\n\r\n");
      assert.match(head, /^HTTP\/1\.1 200 /, `${route}: ${head}`);
      assert.match(head, new RegExp(`content-type: ${type}`, "i"), route);
      assert.match(head, /referrer-policy: no-referrer/i, route);
      assert.equal(body, "", `${route}: no body`);
    }
    const wrong = await fetch(`${worker.url}/rooms/r-1`, { method: "POST" });
    assert.equal(wrong.status, 405);
    assert.equal(wrong.headers.get("allow"), "GET, HEAD");
  });

  test("terminal control sequences never reach chat text; exec stays byte-faithful", async () => {
    const r = room();
    const evil = `${ESC}]52;c;ZXZpbA==\u0007${ESC}[2J${ESC}]0;pwned${ESC}\\`;
    const res = await worker.api("POST", `${r}/message`, { text: `hi ${evil}there`, userId: `${ESC}[31mana` });
    assert.equal(res.status, 200, res.text);
    assert.equal(res.json.messages[0].text, "hi there");
    assert.equal(res.json.messages[0].userId, "ana");
    const painted = await worker.api("POST", `${r}/message`, { text: "ansi bold claim" });
    assert.equal(painted.json.reply, "bold claim", "the model's own escapes are removed");
    const cmd = String.raw`printf '\033]52;c;ZXZpbA==\007\033[2Jout\r\n'`;
    const ran = await worker.api("POST", `${r}/message`, { text: `raw look <run>${cmd}</run>` });
    assert.equal(ran.status, 200, ran.text);
    assert.doesNotMatch(ran.json.reply, CONTROL, JSON.stringify(ran.json.reply));
    assert.match(ran.json.reply, /^look\n\nOutput \(printf .*\):\nout\n\nDone\.$/);
    for (const m of (await worker.api("GET", `${r}/messages`)).json.messages) assert.doesNotMatch(m.text, CONTROL);
    const exec = await worker.api("POST", `${r}/sandbox/exec`, { cmd });
    assert.equal(exec.json.result.stdout, `${ESC}]52;c;ZXZpbA==\u0007${ESC}[2Jout\r\n`);
  });

  test("an answer of only empty <run> tags is a 502 and nothing is stored", async () => {
    const r = room();
    const res = await worker.api("POST", `${r}/message`, { text: "raw <run> </run><run></run>" });
    assert.equal(res.status, 502);
    assert.match(res.json.error, /no text/);
    assert.deepEqual((await worker.api("GET", `${r}/messages`)).json.messages, []);
  });

  test("a room full of long messages sends the model a bounded context and keeps working", async () => {
    const r = room();
    const long = (i) => `${i} ${"x".repeat(7_990)}`;
    for (let i = 0; i < 10; i++) assert.equal((await worker.api("POST", `${r}/message`, { text: long(i) })).status, 200);
    const res = await worker.api("POST", `${r}/message`, { text: long("new") });
    assert.equal(res.status, 200, res.text);
    const { messages } = worker.ai.requests.at(-1).inputs;
    assert.equal(messages[0].role, "system");
    assert.equal(messages.at(-1).content, long("new"));
    const history = messages.slice(1, -1);
    assert.ok(history.length >= 2, "recent history is still sent");
    assert.equal(history[0].role, "user", "whole exchanges");
    assert.ok(history.reduce((n, m) => n + m.content.length, 0) <= LIMITS.historyContextChars);
    assert.equal(history.at(-1).content, `echo: ${long(9)}`, "the newest first");
  });
});

describe("a shell no command can break", () => {
  let stack, worker;
  before(async () => {
    stack = await startStack({ sandboxd: { args: ["--max-sessions", "2"] } });
    worker = stack.worker;
  });
  after(() => stack.stop());

  test("commands that break their shell, from exec or a <run> tag: the next command works at once, files kept", async () => {
    const room = `/api/rooms/${randomUUID()}`;
    await worker.api("POST", `${room}/sandbox/exec`, { cmd: "echo kept > f.txt" });
    const breakers = ["enable -n eval", "shopt -s expand_aliases; alias builtin=echo", "builtin() { sleep 30; }", "enable -n printf", "exec >/dev/null", "set -n", "kill -9 $$"];
    for (const [i, cmd] of breakers.entries()) {
      // (A command that hangs its own end, like the `builtin` function, waits out its own limit.)
      const broke = i % 2 === 0
        ? await worker.api("POST", `${room}/sandbox/exec`, { cmd, timeoutMs: 3000 })
        : await worker.api("POST", `${room}/message`, { text: `raw <run>${cmd}</run>` });
      assert.equal(broke.status, 200, `${cmd}: ${broke.text}`);
      const started = Date.now();
      const next = await worker.api("POST", `${room}/sandbox/exec`, { cmd: "cat f.txt" });
      assert.equal(next.json.result.stdout, "kept\n", `after ${cmd}: ${next.text}`);
      assert.ok(Date.now() - started < 5_000, `after ${cmd}: ${Date.now() - started} ms, not a full timeout`);
      assert.doesNotMatch(broke.text + next.text, /__sandboxd_[0-9a-f]{32}/, `${cmd}: no marker`);
    }
    await worker.api("DELETE", room);
  });

  test("a sandboxd at its cap of shells is a JSON 503, and other rooms keep working", async () => {
    const rooms = [randomUUID(), randomUUID(), randomUUID()].map((id) => `/api/rooms/${id}`);
    assert.equal((await worker.api("POST", `${rooms[0]}/sandbox/exec`, { cmd: "true" })).status, 200);
    assert.equal((await worker.api("POST", `${rooms[1]}/sandbox/exec`, { cmd: "true" })).status, 200);
    const over = await worker.api("POST", `${rooms[2]}/sandbox/exec`, { cmd: "true" });
    assert.equal(over.status, 503, over.text);
    assert.match(over.json.error, /too many sandboxes/);
    assert.equal((await worker.api("POST", `${rooms[0]}/sandbox/exec`, { cmd: "echo still" })).json.result.stdout, "still\n");
    for (const room of rooms) await worker.api("DELETE", room);
  });
});

describe("errors and logs carry no secrets or echoed text", () => {
  let ai, worker;
  before(async () => {
    ai = await startFakeOpenAi();
    const { port } = new URL(ai.url);
    worker = await startWorker({ ai: "local", vars: { AI_BASE_URL: `http://duet:s3cretpw@127.0.0.1:${port}/v1?key=qs3cret` } });
  });
  after(async () => {
    await worker.stop();
    await ai.close();
  });

  test("a failing backend with credentials in its URL", async () => {
    const res = await worker.api("POST", "/api/rooms/secrets/message", { text: "fail" });
    assert.equal(res.status, 502);
    const everything = res.text + worker.logs.join("\n");
    for (const secret of ["s3cretpw", "qs3cret", "duet:", "while answering"]) {
      assert.ok(!everything.includes(secret), `${secret} leaked: ${everything}`);
    }
    assert.match(res.json.error, /http:\/\/127\.0\.0\.1:\d+/, "the backend is still named");
  });
});

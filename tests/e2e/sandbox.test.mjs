// Room sandboxes end to end: the worker on workerd, its Sandbox objects, and
// a real sandboxd running bash as a local process.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, describe, test } from "node:test";

import { exec } from "./support/rooms.mjs";
import { freePort, startStack, startWorker } from "./support/stack.mjs";

const ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;

describe("sandbox exec, <run> tags and cleanup", () => {
  let stack, worker;
  before(async () => {
    stack = await startStack();
    worker = stack.worker;
  });
  after(() => stack.stop());
  const newRoom = () => randomUUID();

  test("exec answers the documented result", async () => {
    const room = newRoom();
    const res = await exec(worker, room, "echo hi");
    assert.equal(res.status, 200);
    assert.equal(res.json.sandboxName, `sandbox-${room}`);
    const r = res.json.result;
    assert.deepEqual(
      { stdout: r.stdout, stderr: r.stderr, exitCode: r.exitCode, success: r.success, command: r.command },
      { stdout: "hi\n", stderr: "", exitCode: 0, success: true, command: "echo hi" },
    );
    assert.ok(Number.isInteger(r.duration) && r.duration >= 0);
    assert.match(r.timestamp, ISO);
  });

  test("a failing command is still a 200, with its exit code and stderr", async () => {
    const res = await exec(worker, newRoom(), "echo out; echo err >&2; (exit 3)");
    assert.equal(res.status, 200);
    assert.deepEqual(
      [res.json.result.stdout, res.json.result.stderr, res.json.result.exitCode, res.json.result.success],
      ["out\n", "err\n", 3, false],
    );
    const exited = await exec(worker, newRoom(), "echo err >&2; exit 4");
    assert.equal(exited.json.result.exitCode, 4);
    assert.match(exited.json.result.stderr, /^err\nsandboxd: the shell ended \(it exited with code 4\); the next command starts in a fresh shell/, "exit says the shell was replaced");
  });

  test("files, working directory and environment persist between commands", async () => {
    const room = newRoom();
    assert.equal((await exec(worker, room, "mkdir -p sub && cd sub && export GREETING=hola && echo data > f.txt")).json.result.exitCode, 0);
    const res = await exec(worker, room, 'pwd; echo "$GREETING"; cat f.txt');
    const [pwd, greeting, data] = res.json.result.stdout.trim().split("\n");
    assert.match(pwd, /\/sandbox-[0-9a-f-]+\/sub$/);
    assert.deepEqual([greeting, data], ["hola", "data"]);
  });

  test("two rooms never see each other's sandbox", async () => {
    const [a, b] = [newRoom(), newRoom()];
    await exec(worker, a, "echo secret > mine.txt && mkdir deep && cd deep");
    const inB = await exec(worker, b, "ls; pwd");
    assert.equal(inB.json.result.stdout.includes("mine.txt"), false);
    assert.doesNotMatch(inB.json.result.stdout, /deep/);
    assert.equal((await exec(worker, b, "cat mine.txt")).json.result.success, false);
    assert.match((await exec(worker, a, "pwd")).json.result.stdout, /deep\n$/);
  });

  test("a command over its timeoutMs is stopped and reported", async () => {
    const room = newRoom();
    const res = await exec(worker, room, "sleep 30", { timeoutMs: 500 });
    assert.equal(res.status, 200);
    assert.equal(res.json.result.timedOut, true);
    assert.equal(res.json.result.success, false);
    assert.ok(res.json.result.duration < 5000);
    assert.equal((await exec(worker, room, "echo still here")).json.result.stdout, "still here\n");
  });

  test("<run> tags run in order in the room's sandbox and become output blocks", async () => {
    const room = newRoom();
    const answer = "raw Let me look.\n<run>mkdir -p proj && cd proj</run>\n<run>pwd</run><run>true</run><run>ls /no/such/dir</run>";
    const res = await worker.api("POST", `/api/rooms/${room}/message`, { text: answer });
    assert.equal(res.status, 200);
    assert.ok(res.json.reply.endsWith("\n\nDone."), "the model's final answer, after it saw the results");
    const blocks = res.json.reply.slice(0, -"\n\nDone.".length).split(/\n\n(?=Output|Error)/).map((block) => block.trim());
    assert.equal(blocks[0], "Let me look.");
    assert.equal(blocks[1], "Output (mkdir -p proj && cd proj):\n[no output]");
    assert.match(blocks[2], /^Output \(pwd\):\n\/.*\/sandbox-[0-9a-f-]+\/proj$/);
    assert.equal(blocks[3], "Output (true):\n[no output]");
    assert.match(blocks[4], /^Output \(ls \/no\/such\/dir\):\nls: cannot access '\/no\/such\/dir': No such file or directory$/);
    assert.equal(blocks.length, 5);
    assert.doesNotMatch(res.json.reply, /<run>|<\/run>/);
    assert.equal(res.json.messages[1].text, res.json.reply, "the stored reply is the final one");
    assert.match((await exec(worker, room, "pwd")).json.result.stdout, /\/proj\n$/, "the agent shares the room's shell");
  });

  test("outputs are cut at 500 characters, never inside a multi-byte character", async () => {
    const cmd = "printf 'a%.0s' $(seq 499); printf 'é€🌍 tail'";
    const res = await worker.api("POST", `/api/rooms/${newRoom()}/message`, { text: `raw <run>${cmd}</run>` });
    const output = res.json.reply.split(":\n")[1].replace(/\n\nDone\.$/, "");
    assert.equal([...output].length, 500);
    assert.equal(output, `${"a".repeat(499)}é`);
  });

  test("at most five commands run per answer, and the reply says so", async () => {
    const room = newRoom();
    const tags = Array.from({ length: 7 }, (_, i) => `<run>echo ${i} >> ran.txt</run>`).join("");
    const res = await worker.api("POST", `/api/rooms/${room}/message`, { text: `raw ${tags}` });
    assert.match(res.json.reply, /\[2 more command\(s\) not run: at most 5 run per answer\]\n\nDone\.$/);
    assert.equal((await exec(worker, room, "cat ran.txt")).json.result.stdout, "0\n1\n2\n3\n4\n");
  });

  test("a flood of output cannot make a response larger than its documented bound", async () => {
    const room = newRoom();
    const res = await exec(worker, room, "head -c 5000000 /dev/zero | tr '\\0' a; head -c 3000000 /dev/zero | tr '\\0' b >&2");
    assert.equal(res.status, 200);
    assert.equal(res.json.result.truncated, true);
    assert.equal(res.json.result.stdout.length, 1024 * 1024);
    assert.equal(res.json.result.stderr.length, 1024 * 1024);
    assert.ok(res.text.length < 2 * 1024 * 1024 + 4096, `exec answer of ${res.text.length} bytes`);

    const tags = Array.from({ length: 8 }, () => "<run>seq 1000000</run>").join(" ");
    const chat = await worker.api("POST", `/api/rooms/${room}/message`, { text: `raw ${tags}` });
    assert.equal(chat.status, 200);
    assert.equal(chat.json.reply.match(/Output \(seq 1000000\):\n/g).length, 5);
    assert.ok(chat.json.reply.length <= 5 * (500 + 40) + 100, `reply of ${chat.json.reply.length} characters`);
  });

  test("cleanup gives a fresh sandbox and an empty history", async () => {
    const room = newRoom();
    await worker.api("POST", `/api/rooms/${room}/message`, { text: "raw <run>echo x > keep.txt && mkdir d && cd d && export K=1</run>" });
    const res = await worker.api("DELETE", `/api/rooms/${room}`);
    assert.equal(res.status, 200);
    assert.deepEqual(res.json, { cleaned: true, roomId: room });
    assert.deepEqual((await worker.api("GET", `/api/rooms/${room}/messages`)).json, { messages: [] });
    const after = await exec(worker, room, 'ls -A; echo "K=$K"; pwd');
    assert.match(after.json.result.stdout, /^K=\n\/.*\/sandbox-[0-9a-f-]+\n$/);
  });
});

describe("without a working sandbox", () => {
  test("exec is a JSON 502 when sandboxd is unreachable, and <run> reports an Error block", async () => {
    const worker = await startWorker({ vars: { SANDBOX_URL: `http://127.0.0.1:${await freePort()}` } });
    try {
      const res = await worker.api("POST", "/api/rooms/down/sandbox/exec", { cmd: "echo hi" });
      assert.equal(res.status, 502);
      assert.match(res.json.error, /cannot reach sandboxd/);
      const chat = await worker.api("POST", "/api/rooms/down/message", { text: "raw Trying.<run>echo hi</run>" });
      assert.equal(chat.status, 200);
      assert.match(chat.json.reply, /^Trying\.\n\nError \(echo hi\):\nsandbox failed: cannot reach sandboxd/);
      const cleanup = await worker.api("DELETE", "/api/rooms/down");
      assert.equal(cleanup.status, 207);
      assert.match(cleanup.json.errors[0], /^sandbox: /);
    } finally {
      await worker.stop();
    }
  });

  test("exec is a JSON 503 naming what is missing when there is no sandbox at all", async () => {
    const worker = await startWorker();
    try {
      const res = await worker.api("POST", "/api/rooms/none/sandbox/exec", { cmd: "echo hi" });
      assert.equal(res.status, 503);
      assert.match(res.json.error, /SANDBOX_URL/);
    } finally {
      await worker.stop();
    }
  });
});

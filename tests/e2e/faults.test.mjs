// Faults end to end, each caused for real: sandboxd killed mid-command,
// sandboxd accepting connections but never answering, a command that forks
// hundreds of processes, and one that tries to fill the disk.
//
// The three suites run at the same time to keep the file short: the
// silent-sandboxd one spends ~22 s waiting on the worker's timers. Each has
// its own worker and sandboxd, so they cannot disturb each other's rooms.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import fs from "node:fs";
import net from "node:net";
import path from "node:path";
import { after, before, describe, test } from "node:test";

import { exec } from "./support/rooms.mjs";
import { startSandboxd, startWorker } from "./support/stack.mjs";
import { sleep, until } from "./support/wait.mjs";

/** What a loaded two-core machine may add to any bound. */
const SLACK = 2000;

/** The promise's value and the milliseconds it took. */
async function timed(promise) {
  const start = performance.now();
  const value = await promise;
  return { value, ms: performance.now() - start };
}

/** Live processes as {pid, session, cwd}; those that vanish meanwhile are skipped. */
function processes() {
  const found = [];
  for (const name of fs.readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = fs.readFileSync(`/proc/${name}/stat`, "utf8");
      const [state, , , session] = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      if (state === "Z") continue;
      let cwd = null;
      try {
        cwd = fs.readlinkSync(`/proc/${name}/cwd`);
      } catch {
        // another user's process, or gone
      }
      found.push({ pid: Number(name), session: Number(session), cwd });
    } catch {
      // gone between listing and reading
    }
  }
  return found;
}

/** Processes in the session of shell `sid` or working inside `dir`. */
function leftovers(sid, dir) {
  return processes().filter((p) => p.session === sid || (p.cwd && (p.cwd === dir || p.cwd.startsWith(`${dir}/`))));
}

/** A TCP server that accepts every connection and never answers. */
async function startSilentServer() {
  const sockets = new Set();
  const server = net.createServer((socket) => {
    sockets.add(socket);
    socket.on("error", () => {});
    socket.on("close", () => sockets.delete(socket));
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${server.address().port}`,
    accepted: () => sockets.size,
    stop: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

describe("faults", { concurrency: true }, () => {
  describe("a sandboxd that accepts connections but never answers", { concurrency: false }, () => {
    let silent, worker;
    before(async () => {
      silent = await startSilentServer();
      worker = await startWorker({ vars: { SANDBOX_URL: silent.url } });
    });
    after(async () => {
      await worker?.stop();
      await silent?.stop();
    });

    test("exec is a JSON 504 after timeoutMs + 2 s; a <run> tag becomes an Error block within the reply's budget", async (t) => {
      // Both at once, in two rooms: the chat one waits out a whole command limit.
      const chat = timed(worker.api("POST", `/api/rooms/${randomUUID()}/message`, { text: "raw <run>echo hi</run>" }));
      const { value: res, ms } = await timed(exec(worker, randomUUID(), "echo hi", { timeoutMs: 1000 }));
      assert.equal(res.status, 504);
      assert.equal(res.headers.get("content-type"), "application/json");
      assert.deepEqual(res.json, { error: "sandbox did not answer within 3000 ms" });
      assert.ok(ms >= 2900 && ms < 3000 + SLACK, `exec took ${ms} ms`);
      assert.ok(silent.accepted() >= 1, "the request reached the silent server");

      const { value: reply, ms: chatMs } = await chat;
      assert.equal(reply.status, 200);
      assert.match(reply.json.reply, /^Error \(echo hi\):\nsandbox did not answer within \d+ ms\n\n\[Stopped: not enough of this message's time was left/);
      assert.ok(chatMs < 25_000 + SLACK, `message took ${chatMs} ms`);
      t.diagnostic(`exec 504 after ${Math.round(ms)} ms; /message 200 after ${Math.round(chatMs)} ms`);
    });
  });

  describe("crashes and hostile commands", { concurrency: false }, () => {
    let sandboxd, worker;
    before(async () => {
      sandboxd = await startSandboxd();
      worker = await startWorker({ vars: { SANDBOX_URL: sandboxd.url } });
    });
    after(async () => {
      await worker?.stop();
      await sandboxd?.stop();
    });
    const workspace = (room) => path.join(fs.realpathSync(sandboxd.root), `sandbox-${room}`);

    test("sandboxd killed mid-command: a JSON 502 at once; after a restart the room works, files kept", async (t) => {
      const room = randomUUID();
      const first = await exec(worker, room, "echo kept > notes.txt; echo $$");
      assert.equal(first.status, 200);
      const shell = Number(first.json.result.stdout);
      const running = timed(exec(worker, room, "sleep 30; echo late > late.txt"));
      const sleeper = await until("the command's `sleep`", () => processes().find((p) => p.session === shell && p.pid !== shell), 5_000);

      const killedAt = performance.now();
      await sandboxd.stop("SIGKILL");
      const { value: res } = await running;
      const answeredIn = performance.now() - killedAt;
      assert.equal(res.status, 502);
      assert.equal(res.headers.get("content-type"), "application/json");
      assert.match(res.json.error, /^sandbox failed: cannot reach sandboxd: /);
      assert.ok(answeredIn < SLACK, `answered ${answeredIn} ms after the kill`);
      t.diagnostic(`502 ${Math.round(answeredIn)} ms after the kill: ${res.json.error}`);

      sandboxd = await startSandboxd({ root: sandboxd.root, port: sandboxd.port });
      const next = await exec(worker, room, "cat notes.txt; echo $$");
      assert.equal(next.status, 200);
      const [kept, newShell] = next.json.result.stdout.trim().split("\n");
      assert.equal(kept, "kept");
      assert.notEqual(Number(newShell), shell, "a fresh shell");

      // The old shell died with sandboxd; only its running `sleep` escaped.
      // Ending that must not let the rest of the old command line run.
      assert.equal(processes().some((p) => p.pid === shell), false, "the old shell lives");
      process.kill(sleeper.pid, "SIGKILL");
      await sleep(300);
      assert.equal(fs.existsSync(path.join(workspace(room), "late.txt")), false);
    });

    test("500 background processes: timed out, all killed, the sandbox usable, another room unaffected", async (t) => {
      const room = randomUUID();
      const shell = Number((await exec(worker, room, "echo $$")).json.result.stdout);
      const storm = timed(exec(worker, room, "for i in $(seq 500); do sleep 60 & done; wait", { timeoutMs: 2000 }));

      // Once the storm is under way, another room runs command after command
      // until the storm is over.
      await until("the storm to be under way", () => processes().filter((p) => p.session === shell).length > 50, 5_000);
      let over = false;
      storm.then(() => (over = true));
      const other = randomUUID();
      const others = [];
      for (let i = 0; !over || i < 3; i++) {
        const { value, ms } = await timed(exec(worker, other, `echo other ${i}`));
        others.push([value.status, value.json.result.stdout, ms]);
        await sleep(50);
      }
      for (const [i, [status, stdout, ms]] of others.entries()) {
        assert.deepEqual([status, stdout], [200, `other ${i}\n`]);
        assert.ok(ms < 1000 + SLACK, `other room's command ${i} took ${ms} ms`);
      }

      const { value: res, ms } = await storm;
      assert.equal(res.status, 200);
      const r = res.json.result;
      assert.deepEqual([r.timedOut, r.exitCode, r.success], [true, 124, false]);
      assert.match(r.stderr, /sandboxd: command timed out after 2000 ms\n$/);
      assert.ok(ms < 2000 + SLACK, `took ${ms} ms`);
      const dir = workspace(room);
      // SIGKILLed processes take a moment to go; give them up to 3 s.
      let left = [];
      await until("the storm's processes to go", () => (left = leftovers(shell, dir).filter((p) => p.pid !== shell)).length === 0, 3000).catch(() => {});
      assert.deepEqual(left, [], "processes of the storm survive");
      assert.equal((await exec(worker, room, "echo alive")).json.result.stdout, "alive\n");
      const slowest = Math.round(Math.max(...others.map(([, , ms]) => ms)));
      t.diagnostic(`storm answered after ${Math.round(ms)} ms; other room ran ${others.length} commands, slowest ${slowest} ms`);
    });
  });

  describe("a command that fills its workspace's disk", { concurrency: false }, () => {
    const LIMIT = 8 * 1024 * 1024;
    let sandboxd, worker;
    before(async () => {
      sandboxd = await startSandboxd({ args: ["--max-file-bytes", String(LIMIT)] });
      worker = await startWorker({ vars: { SANDBOX_URL: sandboxd.url } });
    });
    after(async () => {
      await worker?.stop();
      await sandboxd?.stop();
    });

    test("is stopped at --max-file-bytes with a clear error, and the room stays usable", async (t) => {
      const room = randomUUID();
      assert.equal((await exec(worker, room, "echo before > keep.txt")).status, 200);
      const { value: res, ms } = await timed(exec(worker, room, "head -c 2G /dev/zero > big"));
      assert.equal(res.status, 200);
      const r = res.json.result;
      assert.deepEqual([r.exitCode, r.success, r.timedOut], [153, false, false]); // 128 + SIGXFSZ
      assert.match(r.stderr, /File size limit exceeded/);
      assert.ok(ms < 5000 + SLACK, `took ${ms} ms`);
      t.diagnostic(`stopped after ${Math.round(ms)} ms`);
      const dir = path.join(fs.realpathSync(sandboxd.root), `sandbox-${room}`);
      assert.equal(fs.statSync(path.join(dir, "big")).size, LIMIT);

      const next = await exec(worker, room, "cat keep.txt && rm big && ls");
      assert.deepEqual([next.status, next.json.result.stdout], [200, "before\nkeep.txt\n"]);
    });
  });
});

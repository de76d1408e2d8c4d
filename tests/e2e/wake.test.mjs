// A room always wakes, on both sandbox paths: a workspace sandboxd could not
// restore is never put to sleep; saved files that cannot come back after all
// leave a working empty workspace, a note in the command's stderr and the
// log, and the archive kept for the room to fetch; commands arriving
// together at a sleeping room share one restore. Clocks as in
// lifecycle.test.mjs: a sandbox idle for IDLE_S seconds sleeps. The
// container path runs on the real Docker engine of ./support/engine.mjs;
// sandboxd's flags there are those of the image under this suite's own tag,
// a variant of the sandbox image built with the flags after its ENTRYPOINT.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { gunzipSync } from "node:zlib";
import { after, before, describe, test } from "node:test";

import { SANDBOX_IMAGE, SIDECAR_IMAGE, startEngine } from "./support/engine.mjs";
import { events, untilEvent } from "./support/lifecycle.mjs";
import { exec } from "./support/rooms.mjs";
import { ROOT, startSandboxd, startWorker } from "./support/stack.mjs";
import { sleep, until } from "./support/wait.mjs";

const IDLE_S = 2;
const VARS = { SANDBOX_IDLE_SECONDS: String(IDLE_S), ROOM_TTL_SECONDS: "3600" };
const NOTE = /^duet: this room's saved files could not be restored \(.+\); the workspace starts empty, and the archive is kept at GET \/api\/rooms\/[^/]+\/sandbox\/archive\n/;

/** The two ways the worker reaches sandboxd: `SANDBOX_URL`, and a container. */
const PATHS = {
  SANDBOX_URL: async () => {
    let sandboxd = await startSandboxd();
    const worker = await startWorker({ vars: { ...VARS, SANDBOX_URL: sandboxd.url } });
    return {
      worker,
      // sandboxd as it will answer from now on: restarted with `args`.
      async sandboxdArgs(args) {
        await sandboxd.stop();
        sandboxd = await startSandboxd({ root: sandboxd.root, port: sandboxd.port, args });
      },
      async stop() {
        await worker.stop();
        await sandboxd.stop();
      },
    };
  },
  container: async () => {
    const engine = startEngine();
    const image = await engine.imageFor("wake");
    const cleanup = await engine.follow(image);
    const worker = await startWorker({
      vars: VARS,
      container: { socketPath: engine.socketPath, imageName: image, egressImage: SIDECAR_IMAGE },
    });
    return {
      worker,
      // The next container (a woken room's) runs sandboxd with `args`: the
      // suite's tag names a variant of the sandbox image, or the image itself.
      async sandboxdArgs(args) {
        if (args.length) await engine.variant(image, { args });
        else await engine.tag(SANDBOX_IMAGE, image);
      },
      async stop() {
        await worker.stop();
        await cleanup.removeAll();
        await engine.untag(image);
      },
    };
  },
};

for (const [name, start] of Object.entries(PATHS)) {
  describe(`a room always wakes (${name})`, () => {
    let place, worker;
    before(async () => {
      place = await start();
      worker = place.worker;
    });
    after(async () => {
      await place.stop();
    });
    const slept = (room) => untilEvent(worker, room, "sleep");

    test("symlinks that lead through other symlinks come back, in whatever order", async () => {
      const room = randomUUID();
      const made = await exec(worker, room, "mkdir -p a/b/c && echo deep > a/b/c/f && ln -s a/b/c m && ln -s m/../.. l && ln -s m/f z");
      assert.equal(made.status, 200, made.text);
      await slept(room);
      const res = await exec(worker, room, "readlink l; readlink z; cat z; ls l");
      assert.equal(res.status, 200, res.text);
      assert.equal(res.json.result.stdout, "m/../..\nm/f\ndeep\nb\n", res.json.result.stderr);
      assert.equal(events(worker, room).filter((e) => e.event === "wake").length, 1);
      assert.equal(events(worker, room).find((e) => e.event === "wake").note, undefined, "restored whole");
    });

    test("commands arriving together at a sleeping room share one restore", async () => {
      const room = randomUUID();
      assert.equal((await exec(worker, room, "echo kept > f.txt")).status, 200);
      await slept(room);
      const answers = await Promise.all(Array.from({ length: 8 }, () => exec(worker, room, "cat f.txt")));
      for (const res of answers) {
        assert.equal(res.status, 200, res.text);
        assert.equal(res.json.result.stdout, "kept\n");
      }
      assert.equal(events(worker, room).filter((e) => e.event === "wake").length, 1, "one restore");
    });

    test("saved files that cannot come back: an empty workspace, a note, and the archive kept", async () => {
      const room = randomUUID();
      await place.sandboxdArgs([]);
      const made = await exec(worker, room, 'yes "build output" | head -c 300000 > build.log && echo small > s.txt');
      assert.equal(made.status, 200, made.text);
      const asleep = await slept(room);
      assert.equal((await worker.api("GET", `/api/rooms/${room}/sandbox/archive`)).status, 404, "nothing kept while the files can come back");
      // The fresh sandbox refuses what the old one saved.
      await place.sandboxdArgs(["--max-restore-bytes=100000"]);
      try {
        const res = await exec(worker, room, "ls -A; echo ok > new.txt; echo works");
        assert.equal(res.status, 200, res.text);
        assert.equal(res.json.result.stdout, "works\n", "an empty workspace that works");
        assert.match(res.json.result.stderr, NOTE);
        assert.match(res.json.result.stderr, /100000 bytes/, "with sandboxd's reason");
        const wake = events(worker, room).find((e) => e.event === "wake");
        assert.match(wake.note, /could not be restored/);
        const again = await exec(worker, room, "cat new.txt");
        assert.equal(again.json.result.stdout, "ok\n");
        assert.equal(again.json.result.stderr, "", "the note comes once");

        const kept = await fetch(`${worker.url}/api/rooms/${room}/sandbox/archive`);
        assert.equal(kept.status, 200);
        assert.equal(kept.headers.get("content-type"), "application/gzip");
        const archive = Buffer.from(await kept.arrayBuffer());
        assert.equal(archive.length, asleep.bytes, "the archive as it was saved");
        const tar = gunzipSync(archive);
        assert.ok(tar.includes("build.log") && tar.includes("s.txt"), "its files are in it");

        assert.equal((await worker.api("DELETE", `/api/rooms/${room}`)).status, 200);
        const gone = await worker.api("GET", `/api/rooms/${room}/sandbox/archive`);
        assert.equal(gone.status, 404, "cleanup forgets the kept archive too");
        assert.match(gone.json.error, /keeps no archive/);
      } finally {
        await place.sandboxdArgs([]);
      }
    });

    test("a workspace that could not be restored is not put to sleep: the sandbox stays up", async () => {
      await place.sandboxdArgs(["--max-restore-bytes=100000"]);
      try {
        const room = randomUUID();
        const made = await exec(worker, room, 'yes "build output" | head -c 300000 > build.log; export KEPT=shell');
        assert.equal(made.status, 200, made.text);
        const stayed = await untilEvent(worker, room, "stay-awake");
        assert.match(stayed.note, /not put to sleep, the sandbox stays up: .*cannot be restored/);
        // Asked again after another idle time, not over and over.
        await sleep(IDLE_S * 1000 * 2 + 500);
        const refusals = events(worker, room).filter((e) => e.event === "stay-awake").length;
        assert.ok(refusals >= 2 && refusals <= 3, `${refusals} refusals in about two idle times`);
        const res = await exec(worker, room, 'echo "$KEPT"; wc -c < build.log');
        assert.equal(res.json.result.stdout, "shell\n300000\n", "the same shell, files and all");
        assert.ok(!events(worker, room).some((e) => e.event === "sleep"));
      } finally {
        await place.sandboxdArgs([]);
      }
    });
  });
}

describe("a room always wakes: a tree of many files (SANDBOX_URL)", () => {
  let sandboxd, worker;
  before(async () => {
    sandboxd = await startSandboxd();
    worker = await startWorker({ vars: { ...VARS, SANDBOX_URL: sandboxd.url } });
  });
  after(async () => {
    await worker.stop();
    await sandboxd.stop();
  });

  test("35,000 empty files: the next command answers in time with all of them", async () => {
    const room = randomUUID();
    const made = await exec(worker, room, "mkdir -p nm && cd nm && seq 35000 | xargs touch && cd .. && export KEPT=1");
    assert.equal(made.status, 200, made.text);
    const outcome = await untilEvent(worker, room, ["sleep", "stay-awake"], 60_000);
    const started = Date.now();
    const res = await exec(worker, room, "find nm -type f | wc -l");
    assert.ok(Date.now() - started < 28_000, "within the cold bound");
    assert.equal(res.status, 200, res.text);
    assert.equal(res.json.result.stdout, "35000\n", `${outcome.event}: ${res.json.result.stderr}`);
    assert.equal(res.json.result.stderr, "");
  });
});

/**
 * Makes `folders` folders of `files` empty files each in `room`, 20 folders
 * a command: right after as many files were deleted, this disk can take a
 * millisecond a file (docs/sandbox-limits.md), and one command for all of
 * them could outlast its 20 s.
 */
async function fill(worker, room, folders, files) {
  for (let from = 1; from <= folders; from += 20) {
    const to = Math.min(from + 19, folders);
    const cmd = `for d in $(seq ${from} ${to}); do mkdir d$d; (cd d$d && seq ${files} | xargs touch); done`;
    const res = await exec(worker, room, cmd);
    assert.equal(res.status, 200, res.text);
    assert.equal(res.json.result.exitCode, 0, res.json.result.stderr);
  }
}

describe("a workspace comes back whole, on this machine's disk (SANDBOX_URL)", () => {
  // Under the build folder, not the system's temporary folder, which may be
  // a tmpfs: creating files there says nothing of a real disk.
  let sandboxd, worker;
  before(async () => {
    fs.mkdirSync(path.join(ROOT, "target"), { recursive: true });
    const root = fs.mkdtempSync(path.join(ROOT, "target", "wake-disk-"));
    sandboxd = await startSandboxd({ root });
    worker = await startWorker({ vars: { ...VARS, SANDBOX_URL: sandboxd.url } });
  });
  after(async () => {
    await worker.stop();
    await sandboxd.stop();
    fs.rmSync(sandboxd.root, { recursive: true, force: true });
  });

  /**
   * Sends `cmd` 8 times at once to a sleeping room, each again while the
   * answer is the wake's retryable 503, and answers the 8 results. A
   * workspace that came back empty fails `check`.
   */
  async function eightAtOnce(room, cmd, check) {
    const one = () =>
      until("the room to wake", async () => {
        const res = await exec(worker, room, cmd);
        if (res.status !== 503) return res;
        assert.match(res.json.error, /this room is waking/, res.text);
        assert.equal(res.headers.get("retry-after"), "2");
        return null;
      }, 120_000, { every: 500 });
    const answers = await Promise.all(Array.from({ length: 8 }, one));
    for (const res of answers) {
      assert.equal(res.status, 200, res.text);
      check(res.json.result);
    }
    assert.equal(events(worker, room).filter((e) => e.event === "wake").length, 1, "one restore brought it back");
    return answers;
  }

  const slept = (room) => untilEvent(worker, room, ["sleep", "stay-awake"], 120_000);

  for (const [folders, each] of [
    [120, 120],
    // 30,000 entries, the most a sleep takes.
    [100, 299],
  ]) {
    const files = folders * each;
    test(`${folders} folders of ${each} empty files sleep and come back whole, 8 commands at once`, async () => {
      const room = randomUUID();
      await fill(worker, room, folders, each);
      const made = await exec(worker, room, "find . -type f | wc -l");
      assert.equal(made.status, 200, made.text);
      assert.equal(made.json.result.stdout, `${files}\n`);
      const outcome = await slept(room);
      assert.equal(outcome.event, "sleep", `a tree this size sleeps: ${outcome.note}`);
      await eightAtOnce(room, "find . -type f | wc -l", (result) => assert.equal(result.stdout, `${files}\n`, result.stderr));
    });
  }

  test("a venv, a fifo and links out of the workspace come back as they were; a socket is named", async () => {
    const room = randomUUID();
    const made = await worker.api("POST", `/api/rooms/${room}/sandbox/exec`, {
      cmd: [
        "python3 -m venv --without-pip .venv",
        "mkfifo pipe",
        "ln -s /etc/hostname host-link",
        "ln -s ../../outside dangling",
        "python3 -c \"import socket; socket.socket(socket.AF_UNIX).bind('app.sock')\"",
        ".venv/bin/python -c 'print(6 * 7)'",
      ].join(" && "),
      timeoutMs: 25_000,
    });
    assert.equal(made.status, 200, made.text);
    assert.equal(made.json.result.stdout, "42\n", made.json.result.stderr);
    const before = await exec(worker, room, "readlink .venv/bin/python");
    const outcome = await slept(room);
    assert.equal(outcome.event, "sleep", outcome.note);
    assert.match(outcome.note, /app\.sock \(socket\)/, "the log names what could not be kept");
    const answers = await eightAtOnce(
      room,
      "readlink .venv/bin/python; .venv/bin/python -c 'print(6 * 7)'; test -p pipe && echo fifo; readlink host-link dangling; test -e app.sock || echo no-socket",
      (result) => assert.equal(result.stdout, `${before.json.result.stdout}42\nfifo\n/etc/hostname\n../../outside\nno-socket\n`, result.stderr),
    );
    const noted = answers.filter((res) => /app\.sock \(socket\)/.test(res.json.result.stderr));
    assert.equal(noted.length, 1, "the first command after the wake names the socket in its stderr");
    assert.match(noted[0].json.result.stderr, /^duet: when this room went to sleep, /);
  });
});

describe("a restore slower than a command's wait (SANDBOX_URL)", () => {
  let sandboxd, worker;
  before(async () => {
    sandboxd = await startSandboxd();
    // A command waits 1 ms for the wake, and looks again every 20 ms: far
    // less than restoring 14,520 entries takes on any disk (0.4 s at best).
    worker = await startWorker({ vars: { ...VARS, SANDBOX_URL: sandboxd.url, SANDBOX_WAKE_WAIT_MS: "1" } });
  });
  after(async () => {
    await worker.stop();
    await sandboxd.stop();
  });

  test("commands answer a retryable 503 naming the wake, the restore goes on, and the files come back", async () => {
    const room = randomUUID();
    await fill(worker, room, 120, 120);
    await untilEvent(worker, room, "sleep", 60_000);
    const first = await exec(worker, room, "find . -type f | wc -l");
    assert.equal(first.status, 503, first.text);
    assert.match(first.json.error, /this room is waking: its saved files are being restored/);
    assert.equal(first.headers.get("retry-after"), "2");
    // Nobody waits now: the restore carries on by itself.
    const woke = await untilEvent(worker, room, "wake", 60_000);
    assert.equal(woke.note, undefined, "the files came back");
    const res = await exec(worker, room, "find . -type f | wc -l");
    assert.equal(res.status, 200, res.text);
    assert.equal(res.json.result.stdout, "14400\n");
    assert.equal(events(worker, room).filter((e) => e.event === "wake").length, 1, "one restore");
  });
});

// A room always wakes, on both sandbox paths: a workspace sandboxd could not
// restore is never put to sleep; saved files that cannot come back after all
// leave a working empty workspace, a note in the command's stderr and the
// log, and the archive kept for the room to fetch; commands arriving
// together at a sleeping room share one restore. Clocks as in
// lifecycle.test.mjs: a sandbox idle for IDLE_S seconds sleeps.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { gunzipSync } from "node:zlib";
import { after, before, describe, test } from "node:test";

import { startFakeDocker } from "./support/fake-docker.mjs";
import { events, sleep, until } from "./support/lifecycle.mjs";
import { startSandboxd, startWorker } from "./support/stack.mjs";

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
    const image = "duet-sandbox:wake";
    const docker = await startFakeDocker({ images: { [image]: "sandboxd" } });
    const worker = await startWorker({
      vars: VARS,
      container: { socketPath: docker.socketPath, imageName: image, egressImage: docker.egressImage },
    });
    return {
      worker,
      // The next container (a woken room's) runs sandboxd with `args`.
      async sandboxdArgs(args) {
        docker.setImage(image, ["sandboxd", ...args].join(" "));
      },
      async stop() {
        await worker.stop();
        await docker.close();
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
    const exec = (room, cmd) => worker.api("POST", `/api/rooms/${room}/sandbox/exec`, { cmd });
    const slept = (room) => until("the sleep", () => events(worker, room).find((e) => e.event === "sleep"));

    test("symlinks that lead through other symlinks come back, in whatever order", async () => {
      const room = randomUUID();
      const made = await exec(room, "mkdir -p a/b/c && echo deep > a/b/c/f && ln -s a/b/c m && ln -s m/../.. l && ln -s m/f z");
      assert.equal(made.status, 200, made.text);
      await slept(room);
      const res = await exec(room, "readlink l; readlink z; cat z; ls l");
      assert.equal(res.status, 200, res.text);
      assert.equal(res.json.result.stdout, "m/../..\nm/f\ndeep\nb\n", res.json.result.stderr);
      assert.equal(events(worker, room).filter((e) => e.event === "wake").length, 1);
      assert.equal(events(worker, room).find((e) => e.event === "wake").note, undefined, "restored whole");
    });

    test("commands arriving together at a sleeping room share one restore", async () => {
      const room = randomUUID();
      assert.equal((await exec(room, "echo kept > f.txt")).status, 200);
      await slept(room);
      const answers = await Promise.all(Array.from({ length: 8 }, () => exec(room, "cat f.txt")));
      for (const res of answers) {
        assert.equal(res.status, 200, res.text);
        assert.equal(res.json.result.stdout, "kept\n");
      }
      assert.equal(events(worker, room).filter((e) => e.event === "wake").length, 1, "one restore");
    });

    test("saved files that cannot come back: an empty workspace, a note, and the archive kept", async () => {
      const room = randomUUID();
      await place.sandboxdArgs([]);
      const made = await exec(room, 'yes "build output" | head -c 300000 > build.log && echo small > s.txt');
      assert.equal(made.status, 200, made.text);
      const sleep = await slept(room);
      assert.equal((await worker.api("GET", `/api/rooms/${room}/sandbox/archive`)).status, 404, "nothing kept while the files can come back");
      // The fresh sandbox refuses what the old one saved.
      await place.sandboxdArgs(["--max-restore-bytes=100000"]);
      try {
        const res = await exec(room, "ls -A; echo ok > new.txt; echo works");
        assert.equal(res.status, 200, res.text);
        assert.equal(res.json.result.stdout, "works\n", "an empty workspace that works");
        assert.match(res.json.result.stderr, NOTE);
        assert.match(res.json.result.stderr, /100000 bytes/, "with sandboxd's reason");
        const wake = events(worker, room).find((e) => e.event === "wake");
        assert.match(wake.note, /could not be restored/);
        const again = await exec(room, "cat new.txt");
        assert.equal(again.json.result.stdout, "ok\n");
        assert.equal(again.json.result.stderr, "", "the note comes once");

        const kept = await fetch(`${worker.url}/api/rooms/${room}/sandbox/archive`);
        assert.equal(kept.status, 200);
        assert.equal(kept.headers.get("content-type"), "application/gzip");
        const archive = Buffer.from(await kept.arrayBuffer());
        assert.equal(archive.length, sleep.bytes, "the archive as it was saved");
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
        const made = await exec(room, 'yes "build output" | head -c 300000 > build.log; export KEPT=shell');
        assert.equal(made.status, 200, made.text);
        const stayed = await until("the refused sleep", () => events(worker, room).find((e) => e.event === "stay-awake"));
        assert.match(stayed.note, /not put to sleep, the sandbox stays up: .*cannot be restored/);
        // Asked again after another idle time, not over and over.
        await sleep(IDLE_S * 1000 * 2 + 500);
        const refusals = events(worker, room).filter((e) => e.event === "stay-awake").length;
        assert.ok(refusals >= 2 && refusals <= 3, `${refusals} refusals in about two idle times`);
        const res = await exec(room, 'echo "$KEPT"; wc -c < build.log');
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
    const exec = (cmd) => worker.api("POST", `/api/rooms/${room}/sandbox/exec`, { cmd });
    const made = await exec("mkdir -p nm && cd nm && seq 35000 | xargs touch && cd .. && export KEPT=1");
    assert.equal(made.status, 200, made.text);
    const outcome = await until(
      "the sleep, or its refusal",
      () => events(worker, room).find((e) => e.event === "sleep" || e.event === "stay-awake"),
      60_000,
    );
    const started = Date.now();
    const res = await exec("find nm -type f | wc -l");
    assert.ok(Date.now() - started < 28_000, "within the cold bound");
    assert.equal(res.status, 200, res.text);
    assert.equal(res.json.result.stdout, "35000\n", `${outcome.event}: ${res.json.result.stderr}`);
    assert.equal(res.json.result.stderr, "");
  });
});

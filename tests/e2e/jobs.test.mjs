// A room's jobs end to end (POST/GET/DELETE /api/rooms/{roomId}/jobs):
// commands that outlive a request, run by a real sandboxd beside the
// room's shell, followed by the Sandbox object onto the live feed and into
// the room's log. On the SANDBOX_URL path: a job of 40 s whose output
// watchers see as it prints (across a resume), in a room that does not
// sleep meanwhile and sleeps after it; a follower lost with its evicted
// object; stops, with a trap that ignores SIGTERM; the bound of running
// jobs; the room's DELETE and its expiry leaving no process; roles in token
// mode; a sandboxd restart that loses a job. The container
// path runs one job and a DELETE on the real Docker engine.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { after, before, describe, test } from "node:test";

import { startContainerWorker } from "./support/engine.mjs";
import { first, logged, watch } from "./support/feed.mjs";
import { events, untilEvent } from "./support/lifecycle.mjs";
import { bearer, exec, invite } from "./support/rooms.mjs";
import { startSandboxd, startStack, startWorker } from "./support/stack.mjs";
import { sleep, until } from "./support/wait.mjs";

const IDLE_S = 3;
const TICKS = 40;

/** A room's job routes on `api`. */
const jobs = (api, room) => ({
  start: (body) => api("POST", `/api/rooms/${room}/jobs`, body),
  list: () => api("GET", `/api/rooms/${room}/jobs`),
  get: (id) => api("GET", `/api/rooms/${room}/jobs/${id}`),
  stop: (id) => api("DELETE", `/api/rooms/${room}/jobs/${id}`),
});

/** The output of job `id` among a watcher's events, joined. */
const outputOf = (events, id) =>
  events
    .filter((e) => e.type === "job_output" && e.id === id)
    .map((e) => e.data)
    .join("");

/** The processes whose working directory is in `dir`. */
function processesIn(dir) {
  return fs.readdirSync("/proc").filter((pid) => {
    try {
      return /^\d+$/.test(pid) && fs.readlinkSync(`/proc/${pid}/cwd`).startsWith(dir);
    } catch {
      return false; // gone meanwhile, or not ours to read
    }
  });
}

describe("jobs (SANDBOX_URL)", () => {
  let sandboxd, worker;
  before(async () => {
    sandboxd = await startSandboxd();
    worker = await startWorker({ vars: { SANDBOX_URL: sandboxd.url, SANDBOX_IDLE_SECONDS: String(IDLE_S) } });
  });
  after(async () => {
    await worker.stop();
    await sandboxd.stop();
  });
  const workspace = (room) => path.join(sandboxd.root, `sandbox-${room}`);

  test(`a job of ${TICKS} s: its output on the feed as it prints, across a resume; the room stays awake, exited 0, then sleeps`, async () => {
    const room = randomUUID();
    const on = jobs(worker.api, room);
    const w = watch(worker.url, room);
    await w.opened;
    const cmd = `for i in $(seq 1 ${TICKS}); do echo tick $i; sleep 1; done`;
    const started = await on.start({ cmd, name: "ticker", userId: "ana" });
    assert.equal(started.status, 201, started.text);
    const { job } = started.json;
    assert.match(job.id, /^j[0-9a-f]{16}$/);
    assert.match(job.startedAt, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    assert.deepEqual(job, { id: job.id, cmd, name: "ticker", state: "running", exitCode: null, startedAt: job.startedAt, endedAt: null, startedBy: "ana", source: "exec" });
    const announced = await w.until(first("job"));
    assert.deepEqual(announced.job, job);
    // Printed a second apart, seen a second apart: not at the job's end.
    await w.until((events) => outputOf(events, job.id).includes("tick 3\n"));
    const third = Date.now();
    await w.until((events) => outputOf(events, job.id).includes("tick 5\n"));
    assert.ok(Date.now() - third >= 1_500, "ticks arrive as they are printed");
    const seen = Math.max(...w.events.map((e) => e.seq));
    w.close();
    await sleep(4_000);
    const listed = await on.list();
    assert.equal(listed.status, 200);
    assert.deepEqual(listed.json.jobs.map((j) => [j.id, j.state]), [[job.id, "running"]]);
    const back = watch(worker.url, room, { since: seen });
    const hello = await back.until(first("hello"));
    assert.equal(hello.resumed, true, "the job's output since is still in the log");
    await back.until(first("job_end"), (TICKS + 15) * 1000);
    assert.ok(!events(worker, room).some((e) => e.event === "sleep"), "a room with a running job does not sleep");
    const ticks = Array.from({ length: TICKS }, (_, i) => `tick ${i + 1}\n`).join("");
    const before = outputOf(w.events.filter((e) => e.seq <= seen), job.id);
    assert.equal(before + outputOf(logged(back.events), job.id), ticks, "every tick once, in order, across the resume");
    const ended = back.events.find((e) => e.type === "job_end").job;
    assert.deepEqual([ended.id, ended.state, ended.exitCode], [job.id, "exited", 0]);
    assert.match(ended.endedAt, /Z$/);
    const got = await on.get(job.id);
    assert.equal(got.status, 200);
    assert.deepEqual(got.json.job, { ...ended, output: ticks });
    back.close();
    // Idle from the job's end: the room sleeps then (at the next alarm).
    await untilEvent(worker, room, "sleep", 45_000);
    assert.deepEqual((await on.list()).json.jobs.map((j) => j.state), ["exited"], "its jobs outlive its sleep");
  });

  test("a follower lost with its evicted object is followed again by the alarm, from the byte it got to", async () => {
    const room = randomUUID();
    const on = jobs(worker.api, room);
    const w = watch(worker.url, room);
    await w.opened;
    const { job } = (await on.start({ cmd: "for i in $(seq 1 12); do echo tick $i; sleep 1; done" })).json;
    await w.until((events) => outputOf(events, job.id).includes("tick 3\n"));
    await worker.evict("Sandbox", `sandbox-${room}`);
    const ended = await w.until(first("job_end"), 45_000);
    assert.deepEqual([ended.job.state, ended.job.exitCode], ["exited", 0]);
    const ticks = Array.from({ length: 12 }, (_, i) => `tick ${i + 1}\n`).join("");
    assert.equal(outputOf(w.events, job.id), ticks, "every tick once, in order");
    assert.equal((await on.get(job.id)).json.job.output, ticks);
  });

  test("DELETE stops a job: at once when it obeys SIGTERM, with SIGKILL after 5 s when it ignores it", async () => {
    const room = randomUUID();
    const on = jobs(worker.api, room);
    const obeys = (await on.start({ cmd: "sleep 3000" })).json.job;
    const ignores = (await on.start({ cmd: "trap '' TERM; echo ready; while true; do sleep 0.2; done" })).json.job;
    await until("the job to be ready", async () => (await on.get(ignores.id)).json.job.output === "ready\n");
    let began = Date.now();
    const stopped = await on.stop(obeys.id);
    assert.equal(stopped.status, 200, stopped.text);
    assert.deepEqual([stopped.json.job.state, stopped.json.job.exitCode], ["stopped", 143]);
    assert.match(stopped.text, /"exitCode":143[,}]/, "an integer on the wire, as a Go client decodes it");
    assert.ok(Date.now() - began < 3_000, `${Date.now() - began} ms`);
    began = Date.now();
    const killed = await on.stop(ignores.id);
    const took = Date.now() - began;
    assert.equal(killed.status, 200, killed.text);
    assert.deepEqual([killed.json.job.state, killed.json.job.exitCode, killed.json.job.output], ["stopped", 137, "ready\n"]);
    assert.ok(took >= 4_500 && took < 10_000, `${took} ms`);
    assert.deepEqual(processesIn(workspace(room)), [], "nothing of either runs");
    // An ended job is answered as it is; an unknown one is a 404.
    const again = await on.stop(ignores.id);
    assert.deepEqual([again.status, again.json.job.state], [200, "stopped"]);
    for (const id of ["j0000000000000000", "x", "J00000000000000ff"]) {
      const res = await on.get(id);
      assert.equal(res.status, 404, id);
      assert.match(res.json.error, /no such job/);
    }
    const audit = await worker.api("GET", `/api/rooms/${room}/audit`);
    assert.deepEqual(audit.json.entries.map((e) => [e.command, e.source, e.outcome]).reverse(), [
      ["sleep 3000", "exec", "ran"],
      [ignores.cmd, "exec", "ran"],
    ]);
  });

  test("bad input is a JSON 400; the ninth running job a 429 naming the bound; DELETE of the room leaves no process", async () => {
    const room = randomUUID();
    const on = jobs(worker.api, room);
    for (const [body, field] of [
      [{}, "cmd"],
      [{ cmd: " " }, "cmd"],
      [{ cmd: "true", name: 5 }, "name"],
      [{ cmd: "true", userId: "" }, "userId"],
    ]) {
      const res = await on.start(body);
      assert.equal(res.status, 400, res.text);
      assert.ok(res.json.details[field], res.text);
    }
    assert.equal((await worker.api("PUT", `/api/rooms/${room}/jobs`)).status, 405);
    const started = [];
    for (let i = 0; i < 8; i++) {
      const res = await on.start({ cmd: `sleep 3000; echo ${i}` });
      assert.equal(res.status, 201, res.text);
      started.push(res.json.job.id);
    }
    const ninth = await on.start({ cmd: "sleep 3000" });
    assert.equal(ninth.status, 429, ninth.text);
    assert.match(ninth.json.error, /8 jobs, the most it may at once/);
    assert.equal((await on.list()).json.jobs.length, 8);
    assert.ok(processesIn(workspace(room)).length >= 8);
    // The shell still answers beside them.
    assert.equal((await exec(worker, room, "echo hi")).json.result.stdout, "hi\n");
    const w = watch(worker.url, room);
    await w.opened;
    const deleted = await worker.api("DELETE", `/api/rooms/${room}`);
    assert.equal(deleted.status, 200, deleted.text);
    assert.deepEqual(processesIn(workspace(room)), [], "no job outlives its room");
    await w.until((events) => events.some((e) => e.type === "closed"));
    assert.ok(!w.events.some((e) => e.type === "job_end"), "a deleted room's jobs end with it, unannounced");
    assert.deepEqual((await on.list()).json.jobs, []);
    assert.equal((await on.get(started[0])).status, 404);
  });

  test("a room that expires with a running job stops it first", async () => {
    const ttl = await startWorker({ vars: { SANDBOX_URL: sandboxd.url, ROOM_TTL_SECONDS: "6" } });
    try {
      const room = randomUUID();
      const w = watch(ttl.url, room);
      await w.opened;
      assert.equal((await jobs(ttl.api, room).start({ cmd: "sleep 3000" })).status, 201);
      assert.ok(processesIn(workspace(room)).length > 0);
      // The Sandbox object's expiry (the DuetAgent's comes too, with the feed's end).
      await until("the sandbox's expiry", () => events(ttl, room).some((e) => e.event === "expire" && e.object === "Sandbox"), 15_000);
      assert.deepEqual(processesIn(workspace(room)), [], "the job went first");
      const closed = await w.until(first("closed"));
      assert.equal(closed.reason, "expired");
      assert.deepEqual((await jobs(ttl.api, room).list()).json.jobs, []);
    } finally {
      await ttl.stop();
    }
  });

  // Last: it restarts the suite's sandboxd.
  test("a sandboxd restart loses the room's running job: job_end says so, and nothing of it runs", async () => {
    const room = randomUUID();
    const on = jobs(worker.api, room);
    const w = watch(worker.url, room);
    await w.opened;
    const { job } = (await on.start({ cmd: "echo up; sleep 3000" })).json;
    await w.until((events) => outputOf(events, job.id) === "up\n");
    await sandboxd.stop("SIGKILL");
    sandboxd = await startSandboxd({ port: sandboxd.port, root: sandboxd.root });
    // The alarm, every 30 s while a job runs, follows it again: sandboxd knows it not.
    const ended = await w.until(first("job_end"), 45_000);
    assert.deepEqual([ended.job.id, ended.job.state, ended.job.exitCode], [job.id, "lost", null]);
    assert.match(ended.job.endedAt, /Z$/);
    assert.deepEqual((await on.get(job.id)).json.job, { ...ended.job, output: "up\n" });
    assert.deepEqual(processesIn(workspace(room)), []);
    // The room goes on: a new job runs.
    assert.equal((await on.start({ cmd: "true" })).status, 201);
  });
});

describe("jobs in token mode", () => {
  const SERVICE = "service-token-for-jobs";
  let stack;
  before(async () => {
    stack = await startStack({ vars: { DUET_API_TOKEN: SERVICE } });
  });
  after(() => stack.stop());

  test("a watcher lists and reads jobs but may not start or stop one; a writer may, named by its token", async () => {
    const room = randomUUID();
    const as = async (role, name) => jobs(bearer(stack.worker.url, (await invite(bearer(stack.worker.url, SERVICE), room, role, { name })).token), room);
    const [watcher, writer] = [await as("watcher", "wes"), await as("writer", "bo")];
    const refused = await watcher.start({ cmd: "true" });
    assert.equal(refused.status, 403);
    assert.equal(refused.json.error, "this needs the writer role; the token gives watcher");
    const started = await writer.start({ cmd: "sleep 3000", userId: "ana" });
    assert.equal(started.status, 201, started.text);
    const { job } = started.json;
    assert.equal(job.startedBy, 'bo (says "ana")');
    assert.equal((await watcher.list()).status, 200);
    assert.equal((await watcher.get(job.id)).json.job.state, "running");
    const stop = await watcher.stop(job.id);
    assert.equal(stop.status, 403);
    assert.equal(stop.json.error, "this needs the writer role; the token gives watcher");
    assert.equal((await jobs(bearer(stack.worker.url), room).list()).status, 401);
    const stopped = await writer.stop(job.id);
    assert.deepEqual([stopped.status, stopped.json.job.state], [200, "stopped"]);
  });
});

describe("jobs in a container, on a Docker engine", () => {
  let stack, engine, image, worker;
  before(async () => {
    stack = await startContainerWorker("jobs");
    ({ engine, image, worker } = stack);
  });
  after(() => stack?.stop());

  test("a job runs in the room's container, its output on the feed; DELETE of the room takes it with the container", async () => {
    const room = randomUUID();
    const on = jobs(worker.api, room);
    const w = watch(worker.url, room);
    await w.opened;
    const { job } = (await on.start({ cmd: "for i in 1 2 3; do echo $i; sleep 1; done" })).json;
    const ended = await w.until(first("job_end"), 30_000);
    assert.deepEqual([ended.job.state, ended.job.exitCode], ["exited", 0]);
    assert.equal(outputOf(w.events, job.id), "1\n2\n3\n");
    assert.equal((await on.start({ cmd: "sleep 3000" })).status, 201);
    assert.equal((await engine.containersOfRoom(image, room)).length, 1);
    assert.equal((await worker.api("DELETE", `/api/rooms/${room}`)).status, 200);
    await until("the room's container to go", async () => (await engine.containersOfRoom(image, room)).length === 0, 15_000);
    assert.deepEqual((await on.list()).json.jobs, []);
  });
});

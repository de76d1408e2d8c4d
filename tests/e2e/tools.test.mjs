// The agent's native tools: models that call functions in the OpenAI shape
// are offered `run_command` and the job tools (`start_job`, `job_status`,
// `stop_job`) and ask for commands with tool calls; each call is answered
// by a `tool` turn with its id, on both AI backends. A job's start is a
// command for the room's policy. Models without tools, and answers that
// write <run> tags anyway, keep the tags.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, describe, test } from "node:test";

import { watch } from "./support/feed.mjs";
import { startAgentStack, startSandboxd, startWorker } from "./support/stack.mjs";

const RESULTS = "[Results of your commands, from the room's sandbox]";

for (const backend of ["workers-ai", "openai"]) {
  describe(`tool calls (${backend})`, () => {
    let stack, worker;
    before(async () => {
      // On a local server, a model name the worker does not know: AI_TOOLS says it calls tools.
      stack = await startAgentStack(backend, { vars: { AI_TIMEOUT_MS: "12000" }, openaiVars: { AI_TOOLS: "on" } });
      worker = stack.worker;
    });
    after(() => stack.stop());
    const room = () => `/api/rooms/${randomUUID()}`;
    /** The inputs the model was given in each call since `since`. */
    const inputs = (since) => stack.inputs(since);
    const callCount = () => stack.callCount();

    test("a call runs its command; the result goes back as a tool turn with the call's id", async () => {
      const since = callCount();
      const res = await worker.api("POST", `${room()}/message`, { text: "tool echo hi-there", userId: "ana" });
      assert.equal(res.status, 200, res.text);
      assert.equal(res.json.reply, "Let me check.\n\nOutput (echo hi-there):\nhi-there\n\nsaw: hi-there");
      const [first, second, ...more] = inputs(since);
      assert.equal(more.length, 0, "two model calls");
      assert.equal(first.stream, true);
      assert.deepEqual(first.tools.map((t) => [t.type, t.function.name]), ["run_command", "start_job", "job_status", "stop_job", "read_file", "list_files", "write_file", "edit_file"].map((name) => ["function", name]));
      assert.deepEqual(first.tools[0].function.parameters.required, ["command"]);
      assert.match(first.messages[0].content, /call the run_command tool/);
      assert.doesNotMatch(first.messages[0].content, /<run>/);
      const [call, result] = second.messages.slice(-2);
      assert.equal(call.role, "assistant");
      assert.equal(call.content, "Let me check.");
      assert.equal(call.tool_calls.length, 1);
      const [made] = call.tool_calls;
      assert.equal(made.type, "function");
      assert.equal(made.function.name, "run_command");
      assert.deepEqual(JSON.parse(made.function.arguments), { command: "echo hi-there" });
      assert.deepEqual(result, { role: "tool", tool_call_id: made.id, content: "$ echo hi-there\nexit code 0\nstdout:\nhi-there\nstderr: (empty)" });
      assert.ok(!second.messages.some((m) => m.role === "user" && m.content.startsWith(RESULTS)), "no results turn");
      // Stored as a tag exchange is: the user's message and the whole reply.
      assert.deepEqual(res.json.messages.map((m) => [m.role, m.text]), [["user", "tool echo hi-there"], ["agent", res.json.reply]]);
    });

    test("parallel calls run in order and each hears back its own result", async () => {
      const since = callCount();
      const res = await worker.api("POST", `${room()}/message`, { text: "tools echo one ;; echo two" });
      assert.equal(res.status, 200, res.text);
      // An answer of calls alone: its blocks, as a tag answer's.
      assert.equal(res.json.reply, "Output (echo one):\none\n\nOutput (echo two):\ntwo\n\nsaw: one | two");
      const second = inputs(since)[1].messages;
      const [call, r1, r2] = second.slice(-3);
      assert.deepEqual(call.tool_calls.map((c) => JSON.parse(c.function.arguments).command), ["echo one", "echo two"]);
      assert.deepEqual([r1.tool_call_id, r2.tool_call_id], call.tool_calls.map((c) => c.id));
      assert.match(r1.content, /^\$ echo one\nexit code 0\nstdout:\none\n/);
      assert.match(r2.content, /^\$ echo two\nexit code 0\nstdout:\ntwo\n/);
    });

    test("a malformed call and an unknown tool are error turns the model reads, not failures", async () => {
      const r = room();
      const res = await worker.api("POST", `${r}/message`, { text: "badtool" });
      assert.equal(res.status, 200, res.text);
      const said = JSON.parse(res.json.reply.slice(res.json.reply.indexOf("recovered: ") + "recovered: ".length));
      assert.deepEqual(said, [
        "error: the arguments of run_command are not a JSON object",
        "error: there is no tool `delete_everything`; the tools are run_command, start_job, job_status, stop_job, read_file, list_files, write_file and edit_file",
      ]);
      assert.doesNotMatch(res.json.reply, /Output \(/, "nothing ran");
      const audit = await worker.api("GET", `${r}/audit`);
      assert.deepEqual(audit.json.entries, [], "no command reached the sandbox");
    });

    test("a call's timeoutMs bounds its command", async () => {
      const since = callCount();
      const res = await worker.api("POST", `${room()}/message`, { text: "tool-timeout 1000 sleep 5" });
      assert.equal(res.status, 200, res.text);
      const result = inputs(since)[1].messages.at(-1);
      assert.equal(result.role, "tool");
      assert.match(result.content, /^\$ sleep 5\ntimed out \(exit code \d+\)/);
    });

    test("in a room that asks, a call waits for a writer; approved, its tool turn carries the call's id", async () => {
      const id = randomUUID();
      const r = `/api/rooms/${id}`;
      await worker.api("PUT", `${r}/policy`, { agentCommands: "ask" });
      const feed = watch(worker.url, id);
      await feed.opened;
      const since = callCount();
      const res = await worker.api("POST", `${r}/message`, { text: "tool-timeout 9000 echo approved-call" });
      assert.equal(res.status, 200, res.text);
      const [waiting] = res.json.approvals;
      assert.equal(waiting.command, "echo approved-call");
      assert.match(res.json.reply, /\[Waiting for a writer's approval: #\d+ `echo approved-call`\]$/);
      const decided = await worker.api("POST", `${r}/approvals/${waiting.id}`, { decision: "approve", userId: "ana" });
      assert.equal(decided.status, 200, decided.text);
      await feed.until((events) => events.find((e) => e.type === "message" && e.message.role === "agent" && e.message.text.includes("saw: approved-call")));
      const [first, second] = inputs(since);
      const made = first.tools && second.messages.at(-2).tool_calls[0];
      assert.deepEqual(JSON.parse(made.function.arguments), { command: "echo approved-call", timeoutMs: 9000 });
      assert.deepEqual(second.messages.at(-1), { role: "tool", tool_call_id: made.id, content: "$ echo approved-call\nexit code 0\nstdout:\napproved-call\nstderr: (empty)" });
      const [entry] = (await worker.api("GET", `${r}/audit`)).json.entries;
      assert.equal(entry.command, "echo approved-call");
      assert.equal(entry.decidedBy, "ana");
      feed.close();
    });

    /** What the `job` script heard last, from the reply that ends with it. */
    const heard = (reply) => JSON.parse(reply.slice(reply.indexOf("heard: ") + "heard: ".length));
    const JOB = "j[0-9a-f]{16}";

    test("a job: start_job answers at once with its id; job_status tells its state, exit code and last output", async () => {
      const r = room();
      const since = callCount();
      const res = await worker.api("POST", `${r}/message`, { text: "job job_status echo built-it; exit 3", userId: "ana" });
      assert.equal(res.status, 200, res.text);
      const [first, second] = inputs(since);
      assert.match(first.messages[0].content, /start a job with start_job and check on it with job_status rather than waiting/);
      const started = second.messages.at(-1);
      assert.equal(started.role, "tool");
      assert.match(started.content, new RegExp(`^\\$ echo built-it; exit 3\njob (${JOB}): running$`));
      const id = started.content.match(JOB)[0];
      assert.deepEqual(heard(res.json.reply), [`$ job_status ${id}\njob ${id}: exited, exit code 3\noutput (its last 2000 bytes at most):\nbuilt-it`]);
      assert.ok(
        res.json.reply.startsWith(`Output (echo built-it; exit 3):\njob ${id}: running\n\nChecking.\n\nOutput (job_status ${id}):\njob ${id}: exited, exit code 3\noutput (its last 500 bytes at most):\nbuilt-it\n\nheard: `),
        res.json.reply,
      );
      const { jobs } = (await worker.api("GET", `${r}/jobs`)).json;
      assert.deepEqual(jobs.map((j) => [j.id, j.cmd, j.name, j.source, j.startedBy, j.state, j.exitCode]), [[id, "echo built-it; exit 3", "bg", "agent", "ana", "exited", 3]]);
      const audit = (await worker.api("GET", `${r}/audit`)).json.entries;
      assert.deepEqual(audit.map((e) => [e.command, e.source, e.outcome, e.askedBy, e.tool]), [["echo built-it; exit 3", "agent", "ran", "ana", undefined]], "the start, not the status");
    });

    test("stop_job stops a running job and tells how it ended", async () => {
      const r = room();
      const res = await worker.api("POST", `${r}/message`, { text: "job stop_job sleep 60" });
      assert.equal(res.status, 200, res.text);
      const [said] = heard(res.json.reply);
      assert.match(said, new RegExp(`^\\$ stop_job (${JOB})\njob \\1: stopped, exit code \\d+$`));
      const { jobs } = (await worker.api("GET", `${r}/jobs`)).json;
      assert.deepEqual(jobs.map((j) => j.state), ["stopped"]);
    });

    test("start_job is a command for the room's policy: in ask it waits for a writer; a deny rule refuses it", async () => {
      const id = randomUUID();
      const r = `/api/rooms/${id}`;
      await worker.api("PUT", `${r}/policy`, { agentCommands: "ask", deny: ["rm"] });
      const feed = watch(worker.url, id);
      await feed.opened;
      const res = await worker.api("POST", `${r}/message`, { text: "job job_status echo approved-job", userId: "bo" });
      assert.equal(res.status, 200, res.text);
      const [waiting, ...more] = res.json.approvals;
      assert.deepEqual([waiting.command, more.length], ["echo approved-job", 0]);
      assert.deepEqual((await worker.api("GET", `${r}/jobs`)).json.jobs, [], "nothing started before the approval");
      const decided = await worker.api("POST", `${r}/approvals/${waiting.id}`, { decision: "approve", userId: "ana" });
      assert.equal(decided.status, 200, decided.text);
      // Its status needs no approval: the exchange goes on to the end.
      const done = await feed.until((events) => events.find((e) => e.type === "message" && e.message.role === "agent" && e.message.text.includes("heard: ")));
      assert.match(heard(done.message.text)[0], new RegExp(`^\\$ job_status ${JOB}\njob ${JOB}: exited, exit code 0\noutput [^\n]*\napproved-job$`));
      const started = (await worker.api("GET", `${r}/audit`)).json.entries.find((e) => e.command === "echo approved-job");
      assert.deepEqual([started.source, started.outcome, started.askedBy, started.decidedBy], ["agent", "ran", "bo", "ana"]);
      const denied = await worker.api("POST", `${r}/message`, { text: "job job_status rm -rf /tmp/x" });
      assert.equal(denied.status, 200, denied.text);
      assert.match(denied.json.reply, /Error \(rm -rf \/tmp\/x\):\nthe room's rule `rm` denies it/);
      assert.deepEqual(heard(denied.json.reply), ["$ rm -rf /tmp/x\nnot run: the room's rule `rm` denies it"]);
      const [refused] = (await worker.api("GET", `${r}/audit`)).json.entries;
      assert.deepEqual([refused.command, refused.outcome, refused.rule], ["rm -rf /tmp/x", "refused", "rm"]);
      assert.equal((await worker.api("GET", `${r}/jobs`)).json.jobs.length, 1, "the denied job never started");
      feed.close();
    });

    test("an answer that writes <run> tags anyway runs them, and hears back in a results turn", async () => {
      const since = callCount();
      const res = await worker.api("POST", `${room()}/message`, { text: "tagged echo by-tag" });
      assert.equal(res.status, 200, res.text);
      assert.equal(res.json.reply, "Let me check.\n\nOutput (echo by-tag):\nby-tag\n\nsaw: by-tag");
      const [first, second] = inputs(since);
      assert.ok(first.tools, "tools were offered");
      assert.deepEqual(second.messages.at(-2), { role: "assistant", content: "Let me check. <run>echo by-tag</run>" });
      assert.ok(second.messages.at(-1).content.startsWith(RESULTS));
    });
  });
}

describe("models without tools", () => {
  let sandboxd, worker;
  before(async () => {
    sandboxd = await startSandboxd();
    worker = await startWorker({ vars: { SANDBOX_URL: sandboxd.url, AI_MODEL: "@cf/meta/llama-3.3-70b-instruct-fp8-fast" } });
  });
  after(async () => {
    await worker.stop();
    await sandboxd.stop();
  });

  test("are offered no tools, told of <run> tags, and run commands that way", async () => {
    const since = worker.ai.requests.length;
    const res = await worker.api("POST", `/api/rooms/${randomUUID()}/message`, { text: "tool echo tagged" });
    assert.equal(res.status, 200, res.text);
    assert.match(res.json.reply, /Output \(echo tagged\):\ntagged/);
    const [first, second] = worker.ai.requests.slice(since).map((r) => r.inputs);
    assert.equal(first.tools, undefined);
    assert.match(first.messages[0].content, /<run>ls -la<\/run>/);
    assert.ok(second.messages.at(-1).content.startsWith(RESULTS));
  });
});

describe("AI_TOOLS", () => {
  test("off asks a tool-calling model through tags; an unknown value is a 503 naming it", async () => {
    const off = await startWorker({ vars: { AI_TOOLS: "off" } });
    try {
      const res = await off.api("POST", `/api/rooms/${randomUUID()}/message`, { text: "hi" });
      assert.equal(res.status, 200, res.text);
      assert.equal(off.ai.requests.at(-1).inputs.tools, undefined);
    } finally {
      await off.stop();
    }
    const bad = await startWorker({ vars: { AI_TOOLS: "sometimes" } });
    try {
      const res = await bad.api("POST", `/api/rooms/${randomUUID()}/message`, { text: "hi" });
      assert.equal(res.status, 503);
      assert.match(res.json.error, /AI_TOOLS is "sometimes"; set it to auto, on or off/);
    } finally {
      await bad.stop();
    }
  });
});

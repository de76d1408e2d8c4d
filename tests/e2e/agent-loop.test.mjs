// The agent loop: the model sees the results of the commands it ran and
// carries on, within the limits (4 model answers, 8 commands, 25 s) of one
// /message, on both AI backends; the room sees one reply and stores one
// exchange.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, describe, test } from "node:test";

import { assertMessages, startAgentStack } from "./support/stack.mjs";

const RESULTS = "[Results of your commands, from the room's sandbox]";
const BUDGET_MS = 25_000;
/** Time the machine may add to the budget (workerd, a loaded CI machine). */
const SLACK_MS = 2_000;

async function timed(promise) {
  const started = Date.now();
  const value = await promise;
  return { ...value, ms: Date.now() - started };
}

for (const backend of ["workers-ai", "openai"]) {
  describe(`the agent loop (${backend})`, () => {
    let stack, worker;
    before(async () => {
      stack = await startAgentStack(backend, { vars: { AI_TIMEOUT_MS: "12000" } });
      worker = stack.worker;
    });
    after(() => stack.stop());
    const room = () => `/api/rooms/${randomUUID()}`;
    /** What the model was sent in each call of this test, oldest first. */
    const calls = (since) => stack.inputs(since).map((input) => input.messages);
    const callCount = () => stack.callCount();

    test("a second answer depends on the first command's output", async () => {
      const r = room();
      await worker.api("POST", `${r}/sandbox/exec`, { cmd: "echo secret-42 > note.txt" });
      const since = callCount();
      const res = await worker.api("POST", `${r}/message`, { text: "steps cat note.txt", userId: "ana" });
      assert.equal(res.status, 200, res.text);
      assert.equal(res.json.reply, "Let me check.\n\nOutput (cat note.txt):\nsecret-42\n\nsaw: secret-42");
      const [first, second, ...more] = calls(since);
      assert.equal(more.length, 0, "two model calls");
      assert.equal(second.length, first.length + 2, "the answer and its results follow the first context");
      assert.deepEqual(second.slice(0, first.length), first);
      assert.deepEqual(second.at(-2), { role: "assistant", content: "Let me check. <run>cat note.txt</run>" });
      const results = second.at(-1);
      assert.equal(results.role, "user");
      assert.ok(results.content.startsWith(RESULTS));
      assert.match(results.content, /\$ cat note\.txt\nexit code 0\nstdout:\nsecret-42\nstderr: \(empty\)/);
      // One exchange stored: the user's message and the whole reply.
      assertMessages(assert, res.json.messages);
      assert.deepEqual(res.json.messages.map((m) => [m.role, m.text]), [["user", "steps cat note.txt"], ["agent", res.json.reply]]);
      assert.deepEqual((await worker.api("GET", `${r}/messages`)).json.messages, res.json.messages);
    });

    test("the model sees non-zero exit codes and stderr, more of them than the room", async () => {
      const r = room();
      const since = callCount();
      const cmd = "printf 'x%.0s' $(seq 1500) >&2; (exit 3)";
      const res = await worker.api("POST", `${r}/message`, { text: `steps ${cmd}` });
      assert.equal(res.status, 200, res.text);
      assert.match(res.json.reply, /^Let me check\.\n\nOutput \(printf .*\):\nx{500}\n\nsaw: \(empty\)$/);
      const results = calls(since)[1].at(-1).content;
      assert.match(results, /exit code 3\nstdout: \(empty\)\nstderr:\nx{1500}$/);
    });

    test("a model that never stops is stopped by the limits, within the budget", async () => {
      const r = room();
      const since = callCount();
      const res = await timed(worker.api("POST", `${r}/message`, { text: "forever" }));
      assert.equal(res.status, 200, res.text);
      assert.equal(calls(since).length, 4, "at most four model calls");
      assert.equal(res.json.reply.match(/^Output \(echo \d\):/gm).length, 4);
      assert.match(res.json.reply, /\[Stopped: at most 4 model answers per message; send another message to continue\]$/);
      assert.ok(res.ms < BUDGET_MS + SLACK_MS, `${res.ms} ms`);
      const greedy = await worker.api("POST", `${r}/message`, { text: "greedy" });
      assert.equal(greedy.status, 200);
      assert.equal(greedy.json.reply.match(/^Output \(echo \d-\d\):/gm).length, 8, "at most eight commands");
      assert.match(greedy.json.reply, /\[Stopped: at most 8 commands per message; 2 more not run\]$/);
      assert.equal((await worker.api("GET", `${r}/messages`)).json.messages.length, 4, "two exchanges stored");
    });

    test("a model failure in round two keeps what was done", async () => {
      const r = room();
      const res = await worker.api("POST", `${r}/message`, { text: "fail-after echo first > made.txt" });
      assert.equal(res.status, 200, res.text);
      // The stand-in's failure is Workers AI's 3040 (no capacity); the OpenAI-compatible one's a 500.
      const why = backend === "openai" ? "failed" : "is busy";
      assert.match(res.json.reply, new RegExp(`^Output \\(echo first > made\\.txt\\):\n\\[no output\\]\n\n\\[The model could not continue: AI backend ${why}: `));
      assert.equal((await worker.api("POST", `${r}/sandbox/exec`, { cmd: "cat made.txt" })).json.result.stdout, "first\n");
      assert.equal((await worker.api("GET", `${r}/messages`)).json.messages[1].text, res.json.reply);
    });

    test("a slow model that exhausts the budget ends the reply in time and says so", async () => {
      const r = room();
      // The command takes most of the budget; what is left bounds the second call.
      const res = await timed(worker.api("POST", `${r}/message`, { text: "slow-after 30000 sleep 14; echo woke" }));
      assert.equal(res.status, 200, res.text);
      assert.match(res.json.reply, /^Output \(sleep 14; echo woke\):\nwoke\n\n\[The model could not continue: AI backend did not answer within \d+ ms\]$/);
      assert.ok(res.ms < BUDGET_MS + SLACK_MS, `${res.ms} ms`);
      const late = await timed(worker.api("POST", `${r}/message`, { text: "slow-after 30000 sleep 19" }));
      assert.equal(late.status, 200, late.text);
      assert.match(late.json.reply, /\[Stopped: not enough of this message's time was left for the model to go on\]$/);
      assert.ok(late.ms < BUDGET_MS + SLACK_MS, `${late.ms} ms`);
    });
  });
}

// The room decides what the agent runs, on the built worker and a real
// sandboxd, on both AI backends: a room policy (auto, ask, off; allow and
// deny rules), the agent's commands waiting for a writer's decision on the
// feed and over HTTP, the exchange going on once they are decided (also
// after an eviction and a restart), expiry, first decision wins; and the
// audit of every command. Roles on these routes are in roles.test.mjs.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, describe, test } from "node:test";

import { startFakeOpenAi } from "./support/fake-openai.mjs";
import { watch } from "./support/feed.mjs";
import { startSandboxd, startWorker } from "./support/stack.mjs";
import { sleep, until } from "./support/wait.mjs";

const RESULTS = "[Results of your commands, from the room's sandbox]";
const TIMEOUT_SECONDS = 3;

for (const backend of ["workers-ai", "openai"]) {
  describe(`approvals (${backend})`, () => {
    let sandboxd, worker, ai, vars;
    const start = (persistDir) => (backend === "openai" ? startWorker({ ai: "local", persistDir, vars: { ...vars, AI_BASE_URL: ai.url, AI_MODEL: "local-model" } }) : startWorker({ persistDir, vars }));
    before(async () => {
      sandboxd = await startSandboxd();
      vars = { SANDBOX_URL: sandboxd.url, DUET_APPROVAL_TIMEOUT_SECONDS: String(TIMEOUT_SECONDS) };
      if (backend === "openai") ai = await startFakeOpenAi();
      worker = await start();
    });
    after(async () => {
      await worker.stop();
      await sandboxd.stop();
      await ai?.close();
    });
    /** The last results turn the model was sent. */
    const lastResults = () => {
      const calls = backend === "openai" ? ai.requests.map((r) => r.body.messages) : worker.ai.requests.map((r) => r.inputs.messages);
      return calls.flat().findLast((m) => m.role === "user" && m.content.startsWith(RESULTS))?.content ?? "";
    };
    async function room(policy) {
      const r = randomUUID();
      if (policy) {
        const res = await worker.api("PUT", `/api/rooms/${r}/policy`, policy);
        assert.equal(res.status, 200, res.text);
      }
      return r;
    }
    const decide = (r, id, decision, userId) => worker.api("POST", `/api/rooms/${r}/approvals/${id}`, { decision, ...(userId ? { userId } : {}) });
    const history = async (r) => (await worker.api("GET", `/api/rooms/${r}/messages`)).json.messages;
    const agentSays = (r, text) => async () => {
      const said = async () => (await history(r)).find((m) => m.role === "agent" && m.text.includes(text));
      const failed = async (e) => assert.fail(`${e.message}: ${JSON.stringify(await history(r))}`);
      return until(`an agent message with ${JSON.stringify(text)}`, said, 10_000, { every: 100 }).catch(failed);
    };

    test("a new room runs the agent's commands at once (auto), as before", async () => {
      const r = await room();
      const policy = await worker.api("GET", `/api/rooms/${r}/policy`);
      assert.deepEqual(policy.json, { agentCommands: "auto", allow: [], deny: [] });
      const res = await worker.api("POST", `/api/rooms/${r}/message`, { text: "steps echo auto-ran" });
      assert.equal(res.status, 200);
      assert.match(res.json.reply, /saw: auto-ran/);
      assert.equal(res.json.approvals, undefined, "no approvals field for the Go client in auto");
    });

    test("ask: proposed, announced, approved on the feed's word, run, and the agent goes on", async () => {
      const r = await room({ agentCommands: "ask" });
      const feed = watch(worker.url, r);
      await feed.opened;
      const res = await worker.api("POST", `/api/rooms/${r}/message`, { text: "steps echo approved-output", userId: "ana" });
      assert.equal(res.status, 200, res.text);
      assert.equal(res.json.approvals.length, 1);
      const [waiting] = res.json.approvals;
      assert.equal(waiting.command, "echo approved-output");
      assert.equal(waiting.askedBy, "ana");
      assert.ok(waiting.expiresAt - waiting.askedAt === TIMEOUT_SECONDS * 1000, JSON.stringify(waiting));
      assert.match(res.json.reply, new RegExp(`^Let me check\\.\\n\\n\\[Waiting for a writer's approval: #${waiting.id} \`echo approved-output\`\\]$`));
      assert.equal(res.json.messages.at(-1).text, res.json.reply, "stored as the agent's message");
      const announced = await feed.until((events) => events.find((e) => e.type === "approval"));
      assert.deepEqual(announced.approval, waiting);
      const listed = await worker.api("GET", `/api/rooms/${r}/approvals`);
      assert.deepEqual(listed.json, { approvals: [waiting] });
      // Nothing ran yet.
      assert.ok(!feed.events.some((e) => e.type === "command"));

      const decided = await decide(r, waiting.id, "approve", "bo");
      assert.equal(decided.status, 200, decided.text);
      assert.equal(decided.json.approval.decision, "approved");
      assert.equal(decided.json.approval.decidedBy, "bo");
      const followUp = await feed.until((events) => events.find((e) => e.type === "message" && e.message.role === "agent" && e.message.text.includes("saw:")));
      assert.equal(followUp.message.text, "Output (echo approved-output):\napproved-output\n\nsaw: approved-output");
      const types = feed.events.map((e) => e.type);
      assert.ok(types.indexOf("decided") < types.indexOf("command"), types.join());
      const command = feed.events.find((e) => e.type === "command");
      assert.deepEqual([command.cmd, command.source], ["echo approved-output", "agent"]);
      assert.ok(feed.events.some((e) => e.type === "output" && e.data.includes("approved-output")));
      assert.deepEqual((await worker.api("GET", `/api/rooms/${r}/approvals`)).json, { approvals: [] });
      const stored = await history(r);
      assert.deepEqual(
        stored.map((m) => m.role),
        ["user", "agent", "agent"],
      );
      assert.equal(stored[2].text, followUp.message.text);
      feed.close();
    });

    test("deny: the model is told who denied it, and carries on", async () => {
      const r = await room({ agentCommands: "ask" });
      const res = await worker.api("POST", `/api/rooms/${r}/message`, { text: "steps echo never" });
      const [waiting] = res.json.approvals;
      assert.equal((await decide(r, waiting.id, "deny", "cleo")).json.approval.decision, "denied");
      const followUp = await agentSays(r, "saw: (none)")();
      assert.equal(followUp.text, "Error (echo never):\ndenied by cleo\n\nsaw: (none)");
      assert.match(lastResults(), /\$ echo never\nnot run: denied by cleo/);
      const audit = (await worker.api("GET", `/api/rooms/${r}/audit`)).json.entries;
      assert.equal(audit[0].outcome, "refused");
      assert.equal(audit[0].decidedBy, "cleo");
      assert.equal(audit[0].command, "echo never");
    });

    test("partial approval: one of an answer's commands runs, the other does not, in their order", async () => {
      const r = await room({ agentCommands: "ask" });
      const res = await worker.api("POST", `/api/rooms/${r}/message`, { text: "raw Two. <run>echo first</run><run>echo second</run>" });
      const [one, two] = res.json.approvals;
      assert.deepEqual([one.command, two.command], ["echo first", "echo second"]);
      assert.match(res.json.reply, new RegExp(`#${one.id} \`echo first\`, #${two.id} \`echo second\``));
      await decide(r, two.id, "deny", "dan");
      // One still waits: the exchange does not go on yet.
      await sleep(500);
      assert.equal((await history(r)).length, 2);
      await decide(r, one.id, "approve", "eve");
      const followUp = await agentSays(r, "Done.")();
      assert.match(followUp.text, /^Output \(echo first\):\nfirst\n+Error \(echo second\):\n.*denied by dan[\s\S]*Done\.$/);
      assert.match(lastResults(), /\$ echo first\nexit code 0\nstdout:\nfirst[\s\S]*\$ echo second\nnot run: denied by dan/);
    });

    test("the first decision wins; the second is a 409 that says how it went; unknown ids are 404", async () => {
      const r = await room({ agentCommands: "ask" });
      const [waiting] = (await worker.api("POST", `/api/rooms/${r}/message`, { text: "steps echo once" })).json.approvals;
      const answers = await Promise.all([decide(r, waiting.id, "approve", "fay"), decide(r, waiting.id, "deny", "gus")]);
      const statuses = answers.map((a) => a.status).sort();
      assert.deepEqual(statuses, [200, 409]);
      const won = answers.find((a) => a.status === 200).json.approval;
      const lost = answers.find((a) => a.status === 409).json;
      assert.equal(lost.error, `this command was already ${won.decision} by ${won.decidedBy}`);
      assert.equal((await decide(r, 424242, "approve")).status, 404);
      assert.equal((await decide(r, waiting.id, "maybe")).status, 400);
      await agentSays(r, "saw:")();
    });

    test("a waiting command nobody decides expires as denied, and the model hears it", async () => {
      const r = await room({ agentCommands: "ask" });
      const feed = watch(worker.url, r);
      await feed.opened;
      const [waiting] = (await worker.api("POST", `/api/rooms/${r}/message`, { text: "steps echo too-late" })).json.approvals;
      const expired = await feed.until((events) => events.find((e) => e.type === "decided"), (TIMEOUT_SECONDS + 5) * 1000);
      assert.equal(expired.approval.id, waiting.id);
      assert.equal(expired.approval.decision, "expired");
      assert.ok(expired.approval.decidedAt >= waiting.expiresAt);
      await agentSays(r, "saw: (none)")();
      assert.match(lastResults(), /\$ echo too-late\nnot run: nobody approved it in time/);
      assert.equal((await decide(r, waiting.id, "approve")).status, 409);
      feed.close();
    });

    test("allow rules spare the question in ask; deny rules refuse in every mode; off runs nothing", async () => {
      const r = await room({ agentCommands: "ask", allow: ["echo"], deny: ["rm"] });
      const allowed = await worker.api("POST", `/api/rooms/${r}/message`, { text: "steps echo allowed" });
      assert.equal(allowed.json.approvals, undefined);
      assert.match(allowed.json.reply, /saw: allowed/);
      const mixed = await worker.api("POST", `/api/rooms/${r}/message`, { text: "steps echo x && ls" });
      assert.equal(mixed.json.approvals.length, 1, "one part is not allowed, so it asks");
      await decide(r, mixed.json.approvals[0].id, "deny");

      const auto = await room({ deny: ["rm", "curl"] });
      const denied = await worker.api("POST", `/api/rooms/${auto}/message`, { text: "steps touch keep && rm -f keep" });
      assert.match(denied.json.reply, /the room's rule `rm` denies it/);
      assert.match(lastResults(), /not run: the room's rule `rm` denies it/);
      const files = await worker.api("POST", `/api/rooms/${auto}/sandbox/exec`, { cmd: "ls keep || echo none" });
      assert.equal(files.json.result.stdout, "none\n", "nothing of the command ran");

      const off = await room({ agentCommands: "off" });
      const none = await worker.api("POST", `/api/rooms/${off}/message`, { text: "steps echo nope" });
      assert.match(none.json.reply, /\[Not run: this room lets the agent run no commands\]$/);
      const audit = (await worker.api("GET", `/api/rooms/${off}/audit`)).json.entries;
      assert.deepEqual(
        audit.map((e) => [e.command, e.outcome, e.source]),
        [["echo nope", "refused", "agent"]],
      );
    });

    test("a policy is checked, partial updates keep the rest, and the feed hears of changes", async () => {
      const r = await room();
      const feed = watch(worker.url, r);
      await feed.opened;
      for (const bad of [{ agentCommands: "sometimes" }, { allow: "ls" }, { deny: [""] }, { deny: Array(51).fill("x") }, { allow: ["x".repeat(201)] }]) {
        const res = await worker.api("PUT", `/api/rooms/${r}/policy`, bad);
        assert.equal(res.status, 400, JSON.stringify(bad));
        assert.equal(res.json.error, "invalid request");
      }
      assert.equal((await worker.api("PUT", `/api/rooms/${r}/policy`, "[]")).status, 400);
      await worker.api("PUT", `/api/rooms/${r}/policy`, { deny: ["rm -rf"] });
      const both = await worker.api("PUT", `/api/rooms/${r}/policy`, { agentCommands: "ask" });
      assert.deepEqual(both.json, { agentCommands: "ask", allow: [], deny: ["rm -rf"] });
      const changed = await feed.until((events) => events.filter((e) => e.type === "policy")[1]);
      assert.deepEqual(changed.policy, both.json);
      feed.close();
    });

    test("the audit: who ran what, who let it, how it ended, newest first; it goes with the room", async () => {
      const r = await room({ agentCommands: "ask" });
      await worker.api("POST", `/api/rooms/${r}/sandbox/exec`, { cmd: "exit 3", userId: "hal" });
      const [waiting] = (await worker.api("POST", `/api/rooms/${r}/message`, { text: "steps echo audited", userId: "ida" })).json.approvals;
      await decide(r, waiting.id, "approve", "jo");
      await agentSays(r, "saw: audited")();
      const { entries } = (await worker.api("GET", `/api/rooms/${r}/audit`)).json;
      assert.equal(entries.length, 2);
      const [agent, user] = entries;
      assert.deepEqual(
        { command: agent.command, source: agent.source, askedBy: agent.askedBy, outcome: agent.outcome, decidedBy: agent.decidedBy, exitCode: agent.exitCode },
        { command: "echo audited", source: "agent", askedBy: "ida", outcome: "ran", decidedBy: "jo", exitCode: 0 },
      );
      assert.deepEqual(
        { command: user.command, source: user.source, askedBy: user.askedBy, outcome: user.outcome, decidedBy: user.decidedBy, exitCode: user.exitCode },
        { command: "exit 3", source: "exec", askedBy: "hal", outcome: "ran", decidedBy: null, exitCode: 3 },
      );
      assert.ok(agent.at >= user.at && Number.isInteger(agent.durationMs));
      assert.ok(!worker.logs.some((line) => line.includes("echo audited")), "the audit is not in the logs");
      assert.equal((await worker.api("DELETE", `/api/rooms/${r}`)).status, 200);
      assert.deepEqual((await worker.api("GET", `/api/rooms/${r}/audit`)).json, { entries: [] });
      assert.deepEqual((await worker.api("GET", `/api/rooms/${r}/approvals`)).json, { approvals: [] });
      assert.equal((await worker.api("GET", `/api/rooms/${r}/policy`)).json.agentCommands, "auto");
    });

    test("the audit keeps the newest 200 entries", async () => {
      const r = await room();
      for (let i = 0; i < 205; i++) await worker.api("POST", `/api/rooms/${r}/sandbox/exec`, { cmd: `echo ${i}` });
      const { entries } = (await worker.api("GET", `/api/rooms/${r}/audit`)).json;
      assert.equal(entries.length, 200);
      assert.deepEqual([entries[0].command, entries.at(-1).command], ["echo 204", "echo 5"]);
    });

    test("an eviction, then a restart, between proposal and decision lose nothing", async () => {
      const r = await room({ agentCommands: "ask" });
      const [evicted] = (await worker.api("POST", `/api/rooms/${r}/message`, { text: "steps echo after-eviction" })).json.approvals;
      await worker.evict("DuetAgent", r);
      assert.deepEqual((await worker.api("GET", `/api/rooms/${r}/approvals`)).json.approvals, [evicted]);
      await decide(r, evicted.id, "approve");
      await agentSays(r, "saw: after-eviction")();

      const [restarted] = (await worker.api("POST", `/api/rooms/${r}/message`, { text: "steps echo after-restart" })).json.approvals;
      await worker.stop();
      worker = await start(worker.persistDir);
      assert.equal((await worker.api("GET", `/api/rooms/${r}/policy`)).json.agentCommands, "ask");
      assert.deepEqual((await worker.api("GET", `/api/rooms/${r}/approvals`)).json.approvals, [restarted]);
      await decide(r, restarted.id, "approve");
      await agentSays(r, "saw: after-restart")();
    });
  });
}

describe("the deployment's default mode", () => {
  test("DUET_AGENT_COMMANDS sets a new room's mode; a value it does not know is a 503 that says so", async () => {
    const sandboxd = await startSandboxd();
    for (const [mode, status] of [["ask", 200], ["sometimes", 503]]) {
      const worker = await startWorker({ vars: { SANDBOX_URL: sandboxd.url, DUET_AGENT_COMMANDS: mode } });
      try {
        const r = randomUUID();
        const policy = await worker.api("GET", `/api/rooms/${r}/policy`);
        assert.equal(policy.status, status, policy.text);
        if (status === 200) {
          assert.equal(policy.json.agentCommands, "ask");
          const res = await worker.api("POST", `/api/rooms/${r}/message`, { text: "steps echo waits" });
          assert.equal(res.json.approvals.length, 1);
        } else {
          assert.match(policy.json.error, /DUET_AGENT_COMMANDS is "sometimes"; set it to auto, ask or off/);
        }
      } finally {
        await worker.stop();
      }
    }
    await sandboxd.stop();
  });
});

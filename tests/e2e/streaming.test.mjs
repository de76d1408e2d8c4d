// The agent's answer streams to the room: every model is asked to stream,
// and while anyone watches, what of the answer is visible goes to the live
// feed as `delta` events (coalesced, in order, before the stored message).
// /message still answers {reply, messages}. A stream that stalls is bounded
// like a call; one cut mid-way keeps what came and says so.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, describe, test } from "node:test";

import { pieces } from "./support/ai-standin.mjs";
import { watch } from "./support/feed.mjs";
import { startAgentStack } from "./support/stack.mjs";

/** The events of the exchange for `text`, from its user message on, once its answer came. */
function answered(watcher, text) {
  return watcher.until((all) => {
    const start = all.findIndex((e) => e.type === "message" && e.message.role === "user" && e.message.text === text);
    const mine = start < 0 ? [] : all.slice(start);
    return mine.some((e) => e.type === "message" && e.message.role === "agent") && mine;
  });
}

for (const backend of ["workers-ai", "openai"]) {
  describe(`streaming (${backend})`, () => {
    let stack, worker;
    before(async () => {
      // qwen3 on a local server writes its thoughts into the content.
      stack = await startAgentStack(backend, { vars: { AI_TIMEOUT_MS: "3000" }, model: "qwen3:8b", tokenMs: 5 });
      worker = stack.worker;
    });
    after(() => stack.stop());
    const lastInput = () => stack.inputs().at(-1);
    /** Sends `text` to a fresh room one watcher watches; the exchange's events as it saw them. */
    async function watchedExchange(text) {
      const room = randomUUID();
      const w = watch(worker.url, room);
      await w.opened;
      const res = await worker.api("POST", `/api/rooms/${room}/message`, { text });
      assert.equal(res.status, 200, res.text);
      const events = await answered(w, text);
      w.close();
      return events;
    }

    test("two watchers see the answer grow, in order, before its message; /message answers as before", async () => {
      const room = randomUUID();
      const [a, b] = [watch(worker.url, room), watch(worker.url, room)];
      await Promise.all([a.opened, b.opened]);
      await a.until((events) => events.some((e) => e.type === "presence" && e.watchers.length === 2));
      const text = "long 80";
      const res = await worker.api("POST", `/api/rooms/${room}/message`, { text });
      assert.equal(res.status, 200, res.text);
      const words = Array.from({ length: 80 }, (_, i) => `word${i + 1}`).join(" ");
      assert.equal(res.json.reply, words);
      assert.deepEqual(Object.keys(res.json).sort(), ["messages", "reply"]);
      assert.equal(lastInput().stream, true);
      for (const watcher of [a, b]) {
        const events = await answered(watcher, text);
        const deltas = events.filter((e) => e.type === "delta");
        assert.ok(deltas.length >= 2, `coalesced, but more than one: ${deltas.length}`);
        assert.equal(deltas.map((d) => d.text).join(""), words, "every piece once, in order");
        assert.equal(new Set(deltas.map((d) => d.exchange)).size, 1, "one exchange id");
        assert.match(deltas[0].exchange, /^x[0-9a-f]{16}$/);
        assert.ok(deltas.every((d) => d.round === 1));
        const agentAt = events.findIndex((e) => e.type === "message" && e.message.role === "agent");
        assert.ok(events.findLastIndex((e) => e.type === "delta") < agentAt, "deltas come before the message");
        assert.equal(events[agentAt].message.text, words);
        // Coalesced: far fewer deltas than pieces streamed (one per
        // DELTA_INTERVAL_MS at most, the pieces 5 ms apart).
        assert.ok(deltas.length <= pieces(words).length / 4, `${deltas.length} deltas for ${pieces(words).length} pieces`);
      }
      assert.deepEqual(
        a.events.filter((e) => e.type === "delta").map((e) => e.text),
        b.events.filter((e) => e.type === "delta").map((e) => e.text),
      );
      a.close();
      b.close();
    });

    test("one who joins while the answer is written is given its pieces so far, then the rest; one who comes back, what it missed", async () => {
      const room = randomUUID();
      const early = watch(worker.url, room);
      await early.until((events) => events.some((e) => e.type === "hello"));
      const text = "long 150";
      const sent = worker.api("POST", `/api/rooms/${room}/message`, { text });
      await early.until((events) => events.filter((e) => e.type === "delta").length >= 2 || null);
      const since = Math.max(...early.events.map((e) => e.seq));
      early.close();
      const late = watch(worker.url, room);
      const hello = await late.until((events) => events.find((e) => e.type === "hello"));
      const before = hello.recent.filter((e) => e.type === "delta");
      assert.ok(before.length >= 2, `the pieces so far: ${before.length}`);
      assert.deepEqual(hello.history, [], "the exchange is not stored yet");
      const back = watch(worker.url, room, { since });
      assert.equal((await back.until((events) => events.find((e) => e.type === "hello"))).resumed, true);
      assert.equal((await sent).status, 200);
      const words = Array.from({ length: 150 }, (_, i) => `word${i + 1}`).join(" ");
      const agentMessage = (events) => events.some((e) => e.type === "message" && e.message.role === "agent");
      await late.until(agentMessage);
      await back.until(agentMessage);
      const after = late.events.filter((e) => e.type === "delta");
      assert.equal([...before, ...after].map((d) => d.text).join(""), words, "the pieces so far, then the rest: each once");
      const seen = [...early.events, ...back.events].filter((e) => e.type === "delta");
      assert.equal(seen.map((d) => d.text).join(""), words, "what it saw, then what it missed: each once");
      late.close();
      back.close();
    });

    test("a tool round and its follow-up stream as rounds 1 and 2, commands between them", async () => {
      const events = await watchedExchange("tool echo left");
      const kinds = events.filter((e) => ["delta", "command", "message"].includes(e.type)).map((e) => (e.type === "delta" ? `delta ${e.round}` : e.type));
      const squeezed = kinds.filter((k, i) => k !== kinds[i - 1]);
      assert.deepEqual(squeezed, ["message", "delta 1", "command", "delta 2", "message"]);
      const byRound = (n) => events.filter((e) => e.type === "delta" && e.round === n).map((e) => e.text).join("");
      assert.equal(byRound(1), "Let me check.");
      assert.equal(byRound(2), "saw: left");
    });

    test("thinking and <run> tags never reach the feed", async () => {
      const events = await watchedExchange("steps echo quiet");
      const shown = events.filter((e) => e.type === "delta").map((e) => e.text).join("");
      assert.equal(shown, "Let me check. saw: quiet", "round 1 up to its tag, then round 2");
      assert.doesNotMatch(shown, /<run>|<\/run>|echo quiet|think|The user/);
    });

    test("a stream cut mid-way keeps what came, says so, and runs none of its commands", async () => {
      const room = randomUUID();
      const w = watch(worker.url, room);
      await w.opened;
      const res = await worker.api("POST", `/api/rooms/${room}/message`, { text: "cut half an answer" });
      assert.equal(res.status, 200, res.text);
      assert.match(res.json.reply, /^half an answer\n\n\[The model's answer was cut off \(its stream (ended before the answer did|broke off[^)]*)\); what came is shown, and its commands were not run\]$/);
      await w.until((all) => all.some((e) => e.type === "message" && e.message.role === "agent"));
      assert.equal(w.events.filter((e) => e.type === "delta").map((e) => e.text).join(""), "half an answer");
      assert.deepEqual((await worker.api("GET", `/api/rooms/${room}/messages`)).json.messages.map((m) => m.text), ["cut half an answer", res.json.reply]);
      w.close();
    });

    test("a stream that stalls is bounded by the model's time limit", async () => {
      const started = Date.now();
      const res = await worker.api("POST", `/api/rooms/${randomUUID()}/message`, { text: "stall-mid the start of it" });
      const ms = Date.now() - started;
      assert.equal(res.status, 200, res.text);
      assert.equal(res.json.reply, "the start of it\n\n[The model's answer was cut off (nothing more came within 3000 ms); what came is shown, and its commands were not run]");
      assert.ok(ms >= 3000 && ms < 6000, `${ms} ms`);
    });

    test("a stream that stalls before any text is a timeout, as a silent model is", async () => {
      const res = await worker.api("POST", `/api/rooms/${randomUUID()}/message`, { text: "stall" });
      assert.equal(res.status, 504, res.text);
    });
  });
}

// A local OpenAI-compatible chat completions server (the second AI backend),
// answering with the same script as the Workers AI stand-in. It checks what
// a real server would: the path, JSON, a model name it serves (404
// otherwise, as Ollama and OpenAI answer), well-formed messages, and the
// bearer key when one is configured. Like Ollama, it writes a reasoning
// model's (qwen3, deepseek-r1) thoughts into the content as <think>…</think>,
// whatever the request says; its error bodies echo the user's message, as
// some servers' do.
import http from "node:http";

import { script } from "./ai-standin.mjs";

export async function startFakeOpenAi({ apiKey, models } = {}) {
  const requests = [];
  const server = http.createServer(async (req, res) => {
    const send = (status, body) => {
      res.writeHead(status, { "content-type": "application/json" });
      res.end(JSON.stringify(body));
    };
    let raw = "";
    for await (const chunk of req) raw += chunk;
    if (req.method !== "POST" || req.url !== "/v1/chat/completions") return send(404, { error: { message: "not found" } });
    if (apiKey && req.headers.authorization !== `Bearer ${apiKey}`) return send(401, { error: { message: "bad key" } });
    let body;
    try {
      body = JSON.parse(raw);
    } catch {
      return send(400, { error: { message: "invalid JSON" } });
    }
    const ok =
      typeof body.model === "string" && body.model.length > 0 && Array.isArray(body.messages) && body.messages.length > 0 &&
      body.messages.every((m) => ["system", "user", "assistant"].includes(m.role) && typeof m.content === "string");
    if (!ok) return send(400, { error: { message: "model and messages are required" } });
    if (models && !models.includes(body.model)) return send(404, { error: { message: `model "${body.model}" not found, try pulling it first` } });
    requests.push({ headers: req.headers, body });
    try {
      const answer = await script(body.messages);
      const content = /qwen3|deepseek-r1/.test(body.model) ? `<think>\nThe user said something; answer it.\n</think>\n\n${answer}` : answer;
      send(200, {
        id: `chatcmpl-${requests.length}`,
        object: "chat.completion",
        model: body.model,
        choices: [{ index: 0, message: { role: "assistant", content }, finish_reason: "stop" }],
      });
    } catch (e) {
      send(500, { error: { message: `${e.message} while answering: ${body.messages.at(-1).content}` } });
    }
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${server.address().port}`,
    requests,
    close: () => new Promise((resolve) => { server.closeAllConnections(); server.close(resolve); }),
  };
}

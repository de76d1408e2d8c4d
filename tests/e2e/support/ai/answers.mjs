// An answer written whole: its usage, and a chat model's `chat.completion`
// object. Streamed, the same answer is the events of ./sse.mjs.

export const usage = (completion) => ({ prompt_tokens: 10, completion_tokens: completion, total_tokens: 10 + completion });

/**
 * A chat answer: {id, model, created, text, calls: [{id, name, arguments}],
 * thoughts, reasoningField, finish, usage, end}.
 */
export function chatCompletion(chat) {
  const message = { role: "assistant", content: chat.text, refusal: null };
  if (chat.thoughts) message[chat.reasoningField] = chat.thoughts;
  if (chat.calls.length > 0) {
    message.tool_calls = chat.calls.map(({ id, name, arguments: args }) => ({ id, type: "function", function: { name, arguments: args } }));
  }
  return {
    id: chat.id,
    object: "chat.completion",
    created: chat.created,
    model: chat.model,
    choices: [{ index: 0, message, finish_reason: chat.finish, logprobs: null }],
    usage: chat.usage,
  };
}

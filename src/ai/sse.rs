//! A model's answer as it streams, from either backend: server-sent events
//! (`data: <json>` lines, a blank line after each event, `data: [DONE]` at
//! the end), whose chunks may split anything anywhere.
//!
//! Workers AI streams the shape its model answers in: `{"response": "..."}`
//! pieces for the older models, OpenAI `chat.completion.chunk` objects
//! (`choices[0].delta`) for the current ones and for OpenAI-compatible
//! servers. A delta carries text (`content`), thoughts (`reasoning_content`,
//! `reasoning`: never read), or fragments of tool calls, each fragment
//! naming its call by `index` and the first one giving its `id` and name.
//! An answer is complete at `[DONE]` or at a `finish_reason`; a stream that
//! ends before either was cut.

use serde_json::Value;

use crate::ai::messages::ToolCall;

/// Most bytes of one answer's stream read: far above any answer kept (a
/// model asked for 512 tokens), so only a runaway server meets it.
pub const MAX_STREAM_BYTES: usize = 1 << 20;

/// A streamed answer, put together piece by piece.
#[derive(Debug, Default)]
pub struct Streamed {
    line: Vec<u8>,
    data: String,
    text: String,
    calls: Vec<ToolCall>,
    read: usize,
    complete: bool,
}

impl Streamed {
    /// Reads a chunk of the stream; answers the text it adds.
    pub fn push(&mut self, chunk: &[u8]) -> String {
        let mut added = String::new();
        self.read += chunk.len();
        for &byte in chunk {
            if byte != b'\n' {
                self.line.push(byte);
                continue;
            }
            let line = std::mem::take(&mut self.line);
            let line = String::from_utf8_lossy(&line);
            let line = line.strip_suffix('\r').unwrap_or(&line);
            if line.is_empty() {
                let data = std::mem::take(&mut self.data);
                if !data.is_empty() {
                    added.push_str(&self.event(&data));
                }
            } else if let Some(data) = line.strip_prefix("data:") {
                if !self.data.is_empty() {
                    self.data.push('\n');
                }
                self.data.push_str(data.strip_prefix(' ').unwrap_or(data));
            }
        }
        added
    }

    /// Whether the model finished its answer.
    pub fn complete(&self) -> bool {
        self.complete
    }

    /// Whether more of the stream should not be read.
    pub fn over_bound(&self) -> bool {
        self.read > MAX_STREAM_BYTES
    }

    /// The answer as it stands: its text as it came, and its calls.
    pub fn into_answer(self) -> (String, Vec<ToolCall>) {
        (self.text, self.calls)
    }

    /// One event's data; the text it adds.
    fn event(&mut self, data: &str) -> String {
        if data.trim() == "[DONE]" {
            self.complete = true;
            return String::new();
        }
        let Ok(event) = serde_json::from_str::<Value>(data) else {
            return String::new();
        };
        if let Some(piece) = event["response"].as_str() {
            self.text.push_str(piece);
            return piece.to_owned();
        }
        let choice = &event["choices"][0];
        if !choice["finish_reason"].is_null() {
            self.complete = true;
        }
        let delta = &choice["delta"];
        if let Some(fragments) = delta["tool_calls"].as_array() {
            for fragment in fragments {
                self.call_fragment(fragment);
            }
        }
        let piece = delta["content"].as_str().unwrap_or_default();
        self.text.push_str(piece);
        piece.to_owned()
    }

    /// Adds a fragment to the call it names (by `index`, else the last).
    fn call_fragment(&mut self, fragment: &Value) {
        let index = fragment["index"].as_u64().map(|i| i as usize);
        let at = match index {
            Some(i) => i,
            None if fragment["id"].is_string() || self.calls.is_empty() => self.calls.len(),
            None => self.calls.len() - 1,
        };
        // Calls arrive in order; an index far ahead is not a call to keep.
        if at > self.calls.len() {
            return;
        }
        if at == self.calls.len() {
            self.calls.push(ToolCall::new(
                format!("call_{at}"),
                String::new(),
                String::new(),
            ));
        }
        let call = &mut self.calls[at];
        if let Some(id) = fragment["id"].as_str() {
            call.id = id.to_owned();
        }
        let function = &fragment["function"];
        if let Some(name) = function["name"].as_str() {
            call.function.name.push_str(name);
        }
        if let Some(part) = function["arguments"].as_str() {
            call.function.arguments.push_str(part);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk(delta: &str, finish: &str) -> String {
        format!(
            "data: {{\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"choices\":[{{\"index\":0,\"delta\":{delta},\"finish_reason\":{finish}}}]}}\n\n"
        )
    }

    /// The whole stream fed in pieces of `size` bytes.
    fn read_in(stream: &str, size: usize) -> (Streamed, String) {
        let mut streamed = Streamed::default();
        let mut text = String::new();
        for piece in stream.as_bytes().chunks(size) {
            text.push_str(&streamed.push(piece));
        }
        (streamed, text)
    }

    #[test]
    fn response_pieces_make_the_text() {
        let stream = "data: {\"response\":\"Hel\"}\n\ndata: {\"response\":\"lo\"}\n\ndata: {\"response\":\"\",\"usage\":{\"total_tokens\":3}}\n\ndata: [DONE]\n\n";
        for size in [1, 2, 7, stream.len()] {
            let (streamed, text) = read_in(stream, size);
            assert_eq!(text, "Hello", "chunks of {size}");
            assert!(streamed.complete());
            assert_eq!(streamed.into_answer().0, "Hello");
        }
    }

    #[test]
    fn chat_chunks_give_text_but_never_thoughts() {
        let stream = [
            chunk(
                r#"{"role":"assistant","reasoning_content":"SECRET"}"#,
                "null",
            ),
            chunk(r#"{"reasoning":"ALSO SECRET"}"#, "null"),
            chunk(r#"{"content":"Hi "}"#, "null"),
            chunk(r#"{"content":"there"}"#, "null"),
            chunk(r#"{}"#, "\"stop\""),
        ]
        .concat();
        let (streamed, text) = read_in(&stream, 5);
        assert_eq!(text, "Hi there");
        assert!(streamed.complete(), "a finish_reason completes it");
    }

    #[test]
    fn tool_call_fragments_are_put_together_by_index() {
        let stream = [
            chunk(r#"{"role":"assistant","content":"Let me check."}"#, "null"),
            chunk(r#"{"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"run_command","arguments":""}}]}"#, "null"),
            chunk(r#"{"tool_calls":[{"index":0,"function":{"arguments":"{\"comm"}}]}"#, "null"),
            chunk(r#"{"tool_calls":[{"index":1,"id":"call_b","type":"function","function":{"name":"run_command","arguments":"{\"command\":\"pwd\"}"}}]}"#, "null"),
            chunk(r#"{"tool_calls":[{"index":0,"function":{"arguments":"and\":\"ls\"}"}}]}"#, "null"),
            chunk(r#"{"tool_calls":[{"index":7,"id":"far","function":{"name":"x"}}]}"#, "null"),
            chunk(r#"{}"#, "\"tool_calls\""),
            "data: [DONE]\n\n".into(),
        ]
        .concat();
        let (streamed, text) = read_in(&stream, 3);
        assert_eq!(text, "Let me check.");
        assert_eq!(
            streamed.into_answer().1,
            [
                ToolCall::new(
                    "call_a".into(),
                    "run_command".into(),
                    r#"{"command":"ls"}"#.into()
                ),
                ToolCall::new(
                    "call_b".into(),
                    "run_command".into(),
                    r#"{"command":"pwd"}"#.into()
                ),
            ]
        );
    }

    #[test]
    fn a_stream_without_its_end_is_not_complete() {
        let (streamed, text) = read_in(&chunk(r#"{"content":"half an ans"}"#, "null"), 4);
        assert_eq!(text, "half an ans");
        assert!(!streamed.complete());
    }

    #[test]
    fn crlf_lines_comments_and_junk_are_borne() {
        let stream = ": keep-alive\r\n\r\ndata: {\"response\":\"a\"}\r\n\r\ndata: not json\n\nevent: x\ndata: {\"response\":\"b\"}\n\n";
        assert_eq!(read_in(stream, 2).1, "ab");
    }

    #[test]
    fn a_runaway_stream_is_over_its_bound() {
        let mut streamed = Streamed::default();
        streamed.push(&vec![b'x'; MAX_STREAM_BYTES]);
        assert!(!streamed.over_bound());
        streamed.push(b"x");
        assert!(streamed.over_bound());
    }
}

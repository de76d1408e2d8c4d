//! A model's answer, read the same way from both backends.
//!
//! Workers AI answers in one of two shapes, depending on the model: the
//! older `{"response": "..."}`, or the OpenAI `chat.completion` object
//! (`choices[0].message.content`), which OpenAI-compatible servers use too.
//! Only the answer's text is read: `reasoning_content` (a reasoning model's
//! thoughts) is never deserialized, and `<think>…</think>` blocks, which
//! local reasoning models put into the content itself, are cut out, so a
//! model's thinking never reaches the room or its history.
//!
//! It is read through `serde_json::Value`, whose parser the worker links
//! anyway (request bodies are read with it), not through derived structs:
//! each derived parser is one more copy in the upload.

use serde_json::Value;

/// A model's answer: the text it holds, if any, as either shape has it.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Completion {
    raw: Option<String>,
}

const THINK_OPEN: &str = "<think>";
const THINK_CLOSE: &str = "</think>";

impl Completion {
    /// Reads an answer of either shape; unknown fields (usage, ids,
    /// reasoning) are not looked at. `None` if it is not a JSON object.
    pub fn parse(json: &str) -> Option<Self> {
        let answer: Value = serde_json::from_str(json).ok()?;
        let text = match &answer["response"] {
            Value::String(text) => Some(text.as_str()),
            _ => answer["choices"][0]["message"]["content"].as_str(),
        };
        answer.is_object().then(|| Self {
            raw: text.map(str::to_owned),
        })
    }

    /// The answer's text without any thinking, trimmed; `None` when nothing
    /// is left (no text at all, or only thoughts).
    pub fn text(self) -> Option<String> {
        let text = without_thinking(&self.raw?);
        let text = text.trim();
        (!text.is_empty()).then(|| text.to_owned())
    }
}

/// `text` with every `<think>…</think>` block removed. An unclosed
/// `<think>` runs to the end (the model stopped while thinking); a
/// `</think>` with no opening tag ends thoughts that began before the text
/// (templates that open the block in the prompt).
pub fn without_thinking(text: &str) -> String {
    let mut rest = text;
    if let Some(close) = rest.find(THINK_CLOSE) {
        if !rest[..close].contains(THINK_OPEN) {
            rest = &rest[close + THINK_CLOSE.len()..];
        }
    }
    let mut out = String::with_capacity(rest.len());
    while let Some(open) = rest.find(THINK_OPEN) {
        out.push_str(&rest[..open]);
        let inside = &rest[open + THINK_OPEN.len()..];
        rest = match inside.find(THINK_CLOSE) {
            Some(close) => &inside[close + THINK_CLOSE.len()..],
            None => "",
        };
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(json: &str) -> Option<String> {
        Completion::parse(json).unwrap().text()
    }

    #[test]
    fn reads_the_response_shape() {
        assert_eq!(
            text(r#"{"response": " hi <run>ls</run> ", "usage": {"total_tokens": 3}}"#).as_deref(),
            Some("hi <run>ls</run>")
        );
    }

    #[test]
    fn reads_the_chat_completion_shape_without_reasoning() {
        let json = r#"{
            "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "m",
            "choices": [{"index": 0, "finish_reason": "stop", "message": {
                "role": "assistant", "content": "Let me look.", "reasoning_content": "SECRET THOUGHTS"}}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3}
        }"#;
        assert_eq!(text(json).as_deref(), Some("Let me look."));
    }

    #[test]
    fn no_text_is_none() {
        for json in [
            r#"{}"#,
            r#"{"response": ""}"#,
            r#"{"response": "  \n"}"#,
            r#"{"choices": []}"#,
            r#"{"choices": [{"message": {"content": null, "reasoning_content": "all budget spent thinking"}}]}"#,
            r#"{"choices": [{"message": {"role": "assistant"}}]}"#,
            r#"{"choices": [{"message": {"content": "<think>only thoughts</think>"}}]}"#,
        ] {
            assert_eq!(text(json), None, "{json}");
        }
    }

    #[test]
    fn thinking_blocks_are_removed() {
        assert_eq!(without_thinking("<think>hmm</think>\nAnswer"), "\nAnswer");
        assert_eq!(
            without_thinking("a<think>x</think>b<think>y</think>c"),
            "abc"
        );
        assert_eq!(
            without_thinking("Answer<think>cut off mid-thought"),
            "Answer"
        );
        assert_eq!(
            without_thinking("opened in the prompt</think>Answer"),
            "Answer"
        );
        assert_eq!(without_thinking("no thoughts"), "no thoughts");
        assert_eq!(
            without_thinking("<think>a</think>x</think>y"),
            "x</think>y",
            "only a leading unopened close tag ends thoughts"
        );
    }
}

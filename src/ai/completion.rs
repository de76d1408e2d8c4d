//! A model's answer as it came from its stream (`stream`): its text, and
//! its tool calls. Its text is read without the model's thinking:
//! `reasoning_content` never reaches it, and `<think>…</think>` blocks,
//! which local reasoning models put into the content itself, are cut out,
//! so a model's thinking never reaches the room or its history.

use crate::chat::tools::ToolCall;

/// A model's answer: the text it holds, if any, as either shape has it,
/// and its tool calls.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Completion {
    raw: Option<String>,
    calls: Vec<ToolCall>,
}

const THINK_OPEN: &str = "<think>";
const THINK_CLOSE: &str = "</think>";

impl Completion {
    pub fn new(raw: Option<String>, calls: Vec<ToolCall>) -> Self {
        Self { raw, calls }
    }

    /// The tool calls the answer makes, in order.
    pub fn calls(&self) -> &[ToolCall] {
        &self.calls
    }

    pub fn into_calls(self) -> Vec<ToolCall> {
        self.calls
    }

    /// The answer's text without any thinking, trimmed; `None` when nothing
    /// is left (no text at all, or only thoughts).
    pub fn text(&self) -> Option<String> {
        let text = without_thinking(self.raw.as_deref()?);
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

    fn text(raw: &str) -> Option<String> {
        Completion::new(Some(raw.into()), vec![]).text()
    }

    #[test]
    fn the_text_is_trimmed_and_none_when_empty() {
        assert_eq!(
            text(" hi <run>ls</run> ").as_deref(),
            Some("hi <run>ls</run>")
        );
        for raw in ["", "  \n", "<think>only thoughts</think>"] {
            assert_eq!(text(raw), None, "{raw:?}");
        }
        assert_eq!(Completion::new(None, vec![]).text(), None);
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

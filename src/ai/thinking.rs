//! A model's thinking, cut out of its answer's text. `reasoning_content`
//! never reaches the text (the stream's reader does not read it); what is
//! left are `<think>…</think>` blocks, which local reasoning models put into
//! the content itself, so a model's thinking never reaches the room or its
//! history.

/// The tags of a thinking block.
pub const THINK: (&str, &str) = ("<think>", "</think>");

/// The answer's text without any thinking, trimmed; `None` when nothing is
/// left (no text at all, or only thoughts).
pub fn trimmed_without_thinking(raw: &str) -> Option<String> {
    let text = without_thinking(raw);
    let text = text.trim();
    (!text.is_empty()).then(|| text.to_owned())
}

/// `text` with every `<think>…</think>` block removed. An unclosed
/// `<think>` runs to the end (the model stopped while thinking); a
/// `</think>` with no opening tag ends thoughts that began before the text
/// (templates that open the block in the prompt).
pub fn without_thinking(text: &str) -> String {
    without_spans(after_unopened_close(text).unwrap_or(text), &[THINK])
}

/// What follows a `</think>` that no `<think>` before it opened, if there
/// is one: the text after thoughts that began before the text did.
pub fn after_unopened_close(text: &str) -> Option<&str> {
    let (open, close) = THINK;
    let at = text.find(close)?;
    (!text[..at].contains(open)).then(|| &text[at + close.len()..])
}

/// `text` without each span that opens with one of the `spans`' first tag
/// and ends with its second, the earliest first; an unclosed one runs to
/// the end.
pub fn without_spans(text: &str, spans: &[(&str, &str)]) -> String {
    let mut rest = text;
    let mut out = String::with_capacity(rest.len());
    loop {
        let next = spans
            .iter()
            .filter_map(|&(open, close)| rest.find(open).map(|at| (at, open, close)))
            .min_by_key(|(at, ..)| *at);
        let Some((at, open, close)) = next else {
            out.push_str(rest);
            return out;
        };
        out.push_str(&rest[..at]);
        let inside = &rest[at + open.len()..];
        match inside.find(close) {
            Some(end) => rest = &inside[end + close.len()..],
            None => return out,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_text_is_trimmed_and_none_when_empty() {
        assert_eq!(
            trimmed_without_thinking(" hi <run>ls</run> ").as_deref(),
            Some("hi <run>ls</run>")
        );
        for raw in ["", "  \n", "<think>only thoughts</think>"] {
            assert_eq!(trimmed_without_thinking(raw), None, "{raw:?}");
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

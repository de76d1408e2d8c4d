//! What of an answer still arriving the room may already see, for the live
//! feed's `delta` events: the text so far without the model's thinking,
//! without its `<run>` tags (their commands show as commands), and without
//! terminal control sequences, as the stored reply will be.
//!
//! A stream can split anything anywhere, so what is given out is only what
//! no later text can take back: a `<thi` or `<ru` at the end, or an escape
//! sequence not yet finished, waits for the next piece; an open `<think>` or
//! `<run>` hides the rest until it closes. Models whose templates open the
//! thinking block in the prompt (`thinks_inline`: their text starts as
//! thoughts with no opening tag) show nothing until its `</think>`. Should
//! the visible text still change in a way that would take back what was
//! given (a `</think>` that no `<think>` opened, from any other model),
//! nothing more is given out for that answer; the stored reply, read from
//! the whole answer, is the one that counts.
//!
//! Each take looks at the whole text so far, which is cheap at the pace
//! deltas are taken (see `api::limits::DELTA_INTERVAL_MS`) for answers of at
//! most [`MAX_MODEL_ANSWER_CHARS`].

use crate::ai::thinking::{after_unopened_close, without_spans, THINK};
use crate::api::limits::MAX_MODEL_ANSWER_CHARS;
use crate::exchange::run_tags::RUN;
use crate::text::{first_chars, unfinished_escape, without_controls};

pub struct Shown {
    raw: String,
    given: String,
    thinks_inline: bool,
    stopped: bool,
}

impl Shown {
    pub fn new(thinks_inline: bool) -> Self {
        Self {
            raw: String::new(),
            given: String::new(),
            thinks_inline,
            stopped: false,
        }
    }

    /// Adds a piece of the answer's text, as it came.
    pub fn push(&mut self, piece: &str) {
        // Past four times the kept answer, nothing more can become visible.
        if self.raw.len() < 4 * MAX_MODEL_ANSWER_CHARS {
            self.raw.push_str(piece);
        }
    }

    /// What became visible since the last take, if anything; `done` once
    /// the answer is complete, when nothing is held back any more.
    pub fn take(&mut self, done: bool) -> Option<String> {
        if self.stopped {
            return None;
        }
        let visible = visible(&self.raw, done, self.thinks_inline);
        let Some(new) = visible.strip_prefix(self.given.as_str()) else {
            self.stopped = true;
            return None;
        };
        if new.is_empty() {
            return None;
        }
        let new = new.to_owned();
        self.given = visible;
        Some(new)
    }
}

/// The visible part of `raw`, holding back what may still change unless
/// `done`.
fn visible(raw: &str, done: bool, thinks_inline: bool) -> String {
    let rest = match after_unopened_close(raw) {
        Some(rest) => rest,
        None if thinks_inline => return String::new(),
        None => raw,
    };
    let mut out = without_spans(rest, &[THINK, RUN]);
    if !done {
        hold_back_partial_tag(&mut out);
        if let Some(at) = unfinished_escape(&out) {
            out.truncate(at);
        }
    }
    let clean = without_controls(&out);
    first_chars(clean.trim_start(), MAX_MODEL_ANSWER_CHARS).to_owned()
}

/// Cuts a trailing `<`, `<t`, …, `<run` that may yet become a tag.
fn hold_back_partial_tag(text: &mut String) {
    if let Some(lt) = text.rfind('<') {
        let tail = &text[lt..];
        if [THINK.0, RUN.0].iter().any(|open| open.starts_with(tail)) {
            text.truncate(lt);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `pieces` one by one, taking after each, then takes once done.
    fn deltas(pieces: &[&str], thinks_inline: bool) -> Vec<String> {
        let mut shown = Shown::new(thinks_inline);
        let mut out = vec![];
        for piece in pieces {
            shown.push(piece);
            out.extend(shown.take(false));
        }
        out.extend(shown.take(true));
        out
    }

    #[test]
    fn text_comes_out_as_it_comes_in() {
        assert_eq!(
            deltas(&["Hel", "lo ", "world"], false),
            ["Hel", "lo ", "world"]
        );
    }

    #[test]
    fn thinking_never_shows_however_the_tags_are_split() {
        let answer = "<think>secret plan</think>Answer: <think>more</think>done";
        for split in 1..answer.len() {
            let (a, b) = answer.split_at(split);
            let shown = deltas(&[a, b], false).concat();
            assert_eq!(shown, "Answer: done", "split at {split}");
        }
    }

    #[test]
    fn run_tags_are_hidden_and_a_partial_opener_waits() {
        assert_eq!(
            deltas(&["Let me look. <r", "un>ls -", "la</run> then"], false),
            ["Let me look. ", " then"]
        );
    }

    #[test]
    fn an_unclosed_block_hides_the_rest() {
        assert_eq!(
            deltas(&["Answer <think>cut off mid", "-thought"], false),
            ["Answer "]
        );
    }

    #[test]
    fn inline_thinkers_show_nothing_before_their_close_tag() {
        assert_eq!(
            deltas(
                &[
                    "Okay, the user ",
                    "wants ls.\n</th",
                    "ink>\n\nHere",
                    " it is"
                ],
                true
            ),
            ["Here", " it is"]
        );
        assert!(deltas(&["only thoughts, never closed"], true).is_empty());
    }

    #[test]
    fn text_that_would_be_taken_back_stops_the_deltas() {
        // A model that was not expected to think inline, and did.
        assert_eq!(
            deltas(&["Hmm, thoughts", "</think>", "Answer"], false),
            ["Hmm, thoughts"]
        );
    }

    #[test]
    fn escape_sequences_never_arrive_in_halves() {
        let shown = deltas(
            &[
                "red: \u{1b}[3",
                "1mRED\u{1b}[0m ok \u{1b}]0;ti",
                "tle\u{7}!",
            ],
            false,
        );
        assert_eq!(shown, ["red: ", "RED ok ", "!"]);
    }

    #[test]
    fn what_shows_is_bounded_like_the_kept_answer() {
        let long = "x".repeat(MAX_MODEL_ANSWER_CHARS + 100);
        let total: usize = deltas(&[&long, "more"], false)
            .iter()
            .map(|d| d.chars().count())
            .sum();
        assert_eq!(total, MAX_MODEL_ANSWER_CHARS);
    }
}

//! Plain-text helpers shared by the chat logic and the model backends.
//!
//! Chat text ends up on other people's terminals (the Duet SSH client prints
//! it as it is), so what the worker stores and returns as chat is plain text:
//! [`without_controls`] removes every terminal control sequence and control
//! character but newline and tab. That covers ANSI escape sequences (CSI
//! such as `ESC [2J`, OSC such as the clipboard write `ESC ]52;…` or window
//! titles, DCS, APC, PM, SOS and two-character escapes), the 8-bit C1
//! controls (U+0080–U+009F, which some terminals read as escapes), other C0
//! controls including carriage return and backspace (both can overwrite what
//! is on screen) and DEL. Exec results are not chat: they stay byte-faithful.

use std::borrow::Cow;

/// The longest prefix of `text` with at most `n` characters; never splits one.
pub fn first_chars(text: &str, n: usize) -> &str {
    match text.char_indices().nth(n) {
        Some((end, _)) => &text[..end],
        None => text,
    }
}

const ESC: char = '\u{1b}';
const BEL: char = '\u{7}';

/// Where an escape sequence starts that the end of `text` leaves
/// unfinished, by the forms [`without_controls`] removes: text still
/// arriving holds it back until it is whole.
pub fn unfinished_escape(text: &str) -> Option<usize> {
    let at = text.rfind(ESC)?;
    let mut chars = text[at..].chars().skip(1);
    let finished = match chars.next() {
        None => false,
        Some('[') => chars.any(|c| ('\u{40}'..='\u{7e}').contains(&c)),
        Some(']' | 'P' | 'X' | '^' | '_') => chars.any(|c| c == BEL),
        Some(_) => true,
    };
    (!finished).then_some(at)
}

/// `text` without terminal control sequences or control characters other
/// than `\n` and `\t`; borrowed when there was nothing to remove.
pub fn without_controls(text: &str) -> Cow<'_, str> {
    if !text.chars().any(is_removed) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            ESC => match chars.next() {
                // CSI: parameters and intermediates up to a final byte.
                Some('[') => {
                    for c in chars.by_ref() {
                        if ('\u{40}'..='\u{7e}').contains(&c) {
                            break;
                        }
                    }
                }
                // OSC, DCS, SOS, PM, APC: a string up to BEL or ST (ESC \).
                Some(']' | 'P' | 'X' | '^' | '_') => {
                    while let Some(c) = chars.next() {
                        if c == BEL || (c == ESC && chars.next_if_eq(&'\\').is_some()) {
                            break;
                        }
                    }
                }
                // Any other escape is two characters long.
                _ => {}
            },
            c if is_removed(c) => {}
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

fn is_removed(c: char) -> bool {
    c.is_control() && c != '\n' && c != '\t'
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_text_is_borrowed() {
        let text = "ls -la\n\tdone 🌍";
        assert!(matches!(without_controls(text), Cow::Borrowed(t) if t == text));
    }

    #[test]
    fn escape_sequences_are_removed() {
        let cases = [
            ("\u{1b}[2Jcleared", "cleared"),
            ("\u{1b}[1;31mred\u{1b}[0m text", "red text"),
            ("a\u{1b}]52;c;ZXZpbA==\u{7}b", "ab"),
            ("a\u{1b}]0;title\u{1b}\\b", "ab"),
            ("a\u{1b}P1$rstuff\u{1b}\\b", "ab"),
            ("a\u{1b}_apc\u{7}b", "ab"),
            ("a\u{1b}cb", "ab"),
            ("a\u{9b}31mb", "a31mb"),
            ("over\rwrite\u{8}\u{7f}\u{0}", "overwrite"),
            ("keeps\nlines\tand tabs", "keeps\nlines\tand tabs"),
            ("unterminated \u{1b}]52;c;never ends", "unterminated "),
            ("trailing \u{1b}", "trailing "),
        ];
        for (text, want) in cases {
            assert_eq!(without_controls(text), want, "{text:?}");
        }
    }

    #[test]
    fn cuts_by_characters() {
        assert_eq!(first_chars("日本語", 2), "日本");
        assert_eq!(first_chars("ab", 5), "ab");
        assert_eq!(first_chars("", 3), "");
        assert_eq!(first_chars("a🌍b", 2), "a🌍");
    }
}

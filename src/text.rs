//! Plain-text helpers shared by the chat logic and the model backends.

/// The longest prefix of `text` with at most `n` characters; never splits one.
pub fn first_chars(text: &str, n: usize) -> &str {
    match text.char_indices().nth(n) {
        Some((end, _)) => &text[..end],
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuts_by_characters() {
        assert_eq!(first_chars("日本語", 2), "日本");
        assert_eq!(first_chars("ab", 5), "ab");
        assert_eq!(first_chars("", 3), "");
        assert_eq!(first_chars("a🌍b", 2), "a🌍");
    }
}

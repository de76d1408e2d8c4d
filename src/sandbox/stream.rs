//! Reading sandboxd's streamed exec (`POST /v1/sandboxes/{name}/exec/stream`)
//! as it arrives: its body cut into lines, each read as the `duet_wire`
//! crate says (`start`, `output`, and the `end`, which is exactly the `/exec`
//! answer with a `type` in front). The Sandbox object uses it while the room
//! has watchers, so they see output as it is printed; the exec answer it
//! gives back stays what `/exec` would give.

use duet_wire::stream::{self, Line};

/// Reads one line (without its newline).
pub fn parse(line: &str) -> Result<Line, String> {
    stream::read(line, |line| serde_json::from_str(line))
}

/// Splits a byte stream into lines as chunks arrive.
///
/// A line may be long (the end carries the whole result, megabytes of it,
/// in chunks of a few KiB), so each chunk is searched alone, never what
/// came before it again, and what is taken goes from the front once.
#[derive(Default)]
pub struct Lines {
    pending: Vec<u8>,
}

impl Lines {
    /// Feeds a chunk; answers the lines it completed.
    pub fn feed(&mut self, chunk: &[u8]) -> Vec<String> {
        let searched = self.pending.len();
        self.pending.extend_from_slice(chunk);
        let mut lines = vec![];
        let mut start = 0;
        for (at, _) in chunk.iter().enumerate().filter(|(_, &b)| b == b'\n') {
            let end = searched + at;
            lines.push(String::from_utf8_lossy(&self.pending[start..end]).into_owned());
            start = end + 1;
        }
        self.pending.drain(..start);
        lines
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_read_with_json() {
        assert_eq!(
            parse(r#"{"type":"output","stream":"stderr","data":"é\n"}"#),
            Ok(Line::Output {
                stream: duet_wire::Stream::Stderr,
                data: "é\n".into()
            })
        );
        assert!(parse("not json").is_err());
    }

    #[test]
    fn lines_are_split_whatever_the_chunks() {
        let mut lines = Lines::default();
        assert!(lines.feed(b"{\"a\":").is_empty());
        assert_eq!(lines.feed(b"1}\n{\"b\""), ["{\"a\":1}"]);
        assert_eq!(lines.feed(b":2}\n\n"), ["{\"b\":2}", ""]);
        let text = "é".as_bytes();
        assert!(lines.feed(&text[..1]).is_empty());
        assert_eq!(lines.feed(&[&text[1..], b"\n"].concat()), ["é"]);
        // A long line in small chunks, then two at once.
        let long = "x".repeat(10_000);
        for piece in long.as_bytes().chunks(64) {
            assert!(lines.feed(piece).is_empty());
        }
        assert_eq!(lines.feed(b"\na\nb"), [long.as_str(), "a"]);
        assert_eq!(lines.feed(b"\n"), ["b"]);
    }
}

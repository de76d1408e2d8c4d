//! Capture of one command's stdout or stderr.
//!
//! The shell's pipes are shared by every command of a session, so the end of
//! one command's output is recognised by a marker the wrapper script prints
//! after it (see `session`). A [`Capture`] scans the bytes for that marker,
//! keeps at most `limit` bytes of what came before it, and counts everything
//! past the limit as truncated while still consuming it, so a flood never
//! blocks the command and never grows memory.

/// Output of one stream, ready for the response.
#[derive(Debug, PartialEq, Eq)]
pub struct Captured {
    pub text: String,
    pub truncated: bool,
    /// What followed the marker on its line (the exit status on stdout);
    /// `None` when the marker never came.
    pub trailer: Option<String>,
}

#[derive(Debug)]
enum Scan {
    /// Looking for the marker.
    Searching,
    /// Marker seen; collecting the rest of its line.
    Trailer(Vec<u8>),
    /// Marker line complete; anything after it is not this command's.
    Done(Vec<u8>),
}

#[derive(Debug)]
pub struct Capture {
    marker: Vec<u8>,
    limit: usize,
    kept: Vec<u8>,
    /// Tail bytes that might be the start of a marker split across reads.
    held: Vec<u8>,
    truncated: bool,
    scan: Scan,
}

/// A trailer longer than this cannot be ours; stop collecting it.
const MAX_TRAILER: usize = 32;

impl Capture {
    pub fn new(marker: &[u8], limit: usize) -> Self {
        assert!(!marker.is_empty(), "marker must not be empty");
        Capture {
            marker: marker.to_vec(),
            limit,
            kept: Vec::new(),
            held: Vec::new(),
            truncated: false,
            scan: Scan::Searching,
        }
    }

    /// True once the marker and the rest of its line have been seen.
    pub fn is_done(&self) -> bool {
        matches!(self.scan, Scan::Done(_))
    }

    pub fn feed(&mut self, data: &[u8]) {
        match &mut self.scan {
            Scan::Done(_) => {}
            Scan::Trailer(trailer) => match data.iter().position(|&b| b == b'\n') {
                Some(end) => {
                    trailer.extend_from_slice(&data[..end]);
                    self.scan = Scan::Done(std::mem::take(trailer));
                }
                None if trailer.len() + data.len() > MAX_TRAILER => {
                    self.scan = Scan::Done(std::mem::take(trailer));
                }
                None => trailer.extend_from_slice(data),
            },
            Scan::Searching => {
                let mut held = std::mem::take(&mut self.held);
                held.extend_from_slice(data);
                if let Some(at) = find(&held, &self.marker) {
                    self.keep(&held[..at]);
                    self.scan = Scan::Trailer(Vec::new());
                    self.feed(&held[at + self.marker.len()..]);
                } else {
                    // Only the last marker-length-minus-one bytes can still
                    // turn out to be the start of the marker.
                    let safe = held.len().saturating_sub(self.marker.len() - 1);
                    self.keep(&held[..safe]);
                    held.drain(..safe);
                    self.held = held;
                }
            }
        }
    }

    fn keep(&mut self, bytes: &[u8]) {
        let room = self.limit - self.kept.len();
        if bytes.len() > room {
            self.kept.extend_from_slice(&bytes[..room]);
            self.truncated = true;
        } else {
            self.kept.extend_from_slice(bytes);
        }
    }

    pub fn finish(mut self) -> Captured {
        let trailer = match std::mem::replace(&mut self.scan, Scan::Searching) {
            Scan::Done(t) | Scan::Trailer(t) => Some(String::from_utf8_lossy(&t).into_owned()),
            Scan::Searching => {
                // No marker came (the shell died): what is held is output.
                let held = std::mem::take(&mut self.held);
                self.keep(&held);
                None
            }
        };
        let (text, truncated) = to_text(self.kept, self.truncated, self.limit);
        Captured {
            text,
            truncated,
            trailer,
        }
    }
}

/// First occurrence of `needle`; a quick scan for its first byte keeps this
/// fast on floods.
fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    let first = *needle.first()?;
    let mut from = 0;
    while let Some(offset) = haystack[from..].iter().position(|&b| b == first) {
        let at = from + offset;
        if haystack[at..].starts_with(needle) {
            return Some(at);
        }
        from = at + 1;
    }
    None
}

/// Turns captured bytes into text of at most `limit` bytes: valid UTF-8 is
/// kept as is, invalid bytes become U+FFFD, and a cut never splits a
/// character.
fn to_text(mut bytes: Vec<u8>, mut truncated: bool, limit: usize) -> (String, bool) {
    if truncated {
        // The cut may have split the last character; that is not bad input.
        bytes.truncate(bytes.len() - incomplete_utf8_tail(&bytes));
    }
    let mut text = match String::from_utf8(bytes) {
        Ok(text) => text,
        Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
    };
    // Replacement characters are longer than the bytes they replace.
    if text.len() > limit {
        text.truncate(text.floor_char_boundary(limit));
        truncated = true;
    }
    (text, truncated)
}

/// Length of an incomplete UTF-8 sequence at the end of `bytes` (0 if none).
fn incomplete_utf8_tail(bytes: &[u8]) -> usize {
    for back in 1..=bytes.len().min(4) {
        let byte = bytes[bytes.len() - back];
        if byte & 0xC0 == 0x80 {
            continue; // continuation byte: keep looking for the lead byte
        }
        let needed = match byte {
            0xC0..=0xDF => 2,
            0xE0..=0xEF => 3,
            0xF0..=0xF7 => 4,
            _ => 1,
        };
        return if needed > back { back } else { 0 };
    }
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    const MARKER: &[u8] = b"@@END@@";

    fn capture_chunks(chunks: &[&[u8]], limit: usize) -> (Captured, bool) {
        let mut c = Capture::new(MARKER, limit);
        for chunk in chunks {
            c.feed(chunk);
        }
        let done = c.is_done();
        (c.finish(), done)
    }

    #[test]
    fn marker_after_output_without_newline() {
        let (out, done) = capture_chunks(&[b"abc@@END@@0\n"], 100);
        assert!(done);
        assert_eq!(out.text, "abc");
        assert_eq!(out.trailer.as_deref(), Some("0"));
        assert!(!out.truncated);
    }

    #[test]
    fn marker_split_across_every_byte_boundary() {
        let stream = b"hello\nworld@@END@@127\nleftover";
        for split in 0..stream.len() {
            let (out, done) = capture_chunks(&[&stream[..split], &stream[split..]], 100);
            assert!(done, "split at {split}");
            assert_eq!(out.text, "hello\nworld", "split at {split}");
            assert_eq!(out.trailer.as_deref(), Some("127"), "split at {split}");
        }
    }

    #[test]
    fn byte_at_a_time() {
        let stream = b"x@@END@@@@END@@42\n";
        let chunks: Vec<&[u8]> = stream.chunks(1).collect();
        let (out, done) = capture_chunks(&chunks, 100);
        assert!(done);
        assert_eq!(out.text, "x");
        assert_eq!(out.trailer.as_deref(), Some("@@END@@42"));
    }

    #[test]
    fn partial_marker_is_output_when_no_marker_comes() {
        let (out, done) = capture_chunks(&[b"data @@END"], 100);
        assert!(!done);
        assert_eq!(out.text, "data @@END");
        assert_eq!(out.trailer, None);
    }

    #[test]
    fn bytes_after_the_marker_line_are_dropped() {
        let (out, _) = capture_chunks(&[b"a@@END@@1\n", b"late"], 100);
        assert_eq!(out.text, "a");
        assert_eq!(out.trailer.as_deref(), Some("1"));
    }

    #[test]
    fn output_past_the_limit_is_counted_but_not_kept() {
        let big = vec![b'z'; 10_000];
        let (out, done) = capture_chunks(&[&big, &big, b"@@END@@0\n"], 1000);
        assert!(done);
        assert_eq!(out.text.len(), 1000);
        assert!(out.truncated);
    }

    #[test]
    fn output_exactly_at_the_limit_is_not_truncated() {
        let (out, _) = capture_chunks(&[b"12345@@END@@0\n"], 5);
        assert_eq!(out.text, "12345");
        assert!(!out.truncated);
    }

    #[test]
    fn cut_never_splits_a_character() {
        // "aé€🌍" is 1 + 2 + 3 + 4 = 10 bytes.
        for limit in 0..=10 {
            let (out, _) = capture_chunks(&["aé€🌍b".as_bytes(), b"@@END@@0\n"], limit);
            let expected = match limit {
                0 => "",
                1..=2 => "a",
                3..=5 => "aé",
                6..=9 => "aé€",
                _ => "aé€🌍",
            };
            assert_eq!(out.text, expected, "limit {limit}");
            assert!(out.truncated, "limit {limit}");
        }
    }

    #[test]
    fn invalid_bytes_are_replaced_and_still_capped() {
        let (out, _) = capture_chunks(&[b"ok\xff@@END@@0\n"], 100);
        assert_eq!(out.text, "ok\u{FFFD}");
        assert!(!out.truncated);
        // Three invalid bytes become nine bytes of U+FFFD; cap at 4.
        let (out, _) = capture_chunks(&[b"\xff\xfe\xfd@@END@@0\n"], 4);
        assert_eq!(out.text, "\u{FFFD}");
        assert!(out.truncated);
    }

    #[test]
    fn find_locates_first_occurrence() {
        assert_eq!(find(b"xx@@END@@", MARKER), Some(2));
        assert_eq!(find(b"@@EN@@END@@@@END@@", MARKER), Some(4));
        assert_eq!(find(b"@@END@", MARKER), None);
        assert_eq!(find(b"", MARKER), None);
        assert_eq!(find(b"abc", b""), None);
    }

    #[test]
    fn incomplete_tail_lengths() {
        assert_eq!(incomplete_utf8_tail(b""), 0);
        assert_eq!(incomplete_utf8_tail(b"abc"), 0);
        assert_eq!(incomplete_utf8_tail("é".as_bytes()), 0);
        assert_eq!(incomplete_utf8_tail(&"é".as_bytes()[..1]), 1);
        assert_eq!(incomplete_utf8_tail(&"🌍".as_bytes()[..3]), 3);
        assert_eq!(incomplete_utf8_tail(&"a€".as_bytes()[..3]), 2);
        assert_eq!(incomplete_utf8_tail("🌍".as_bytes()), 0);
    }
}

//! The newest output of a job or of a terminal, as bytes, and the pieces
//! its output events carry.
//!
//! Offsets count every byte printed, so a reader can say where it stopped.
//! What is kept is the newest `capacity` bytes at most, trimmed from the
//! front to start at a character (so text made of it never begins with
//! half of one). Bytes stay bytes until a piece is cut: a piece ends
//! between characters and its text is at most [`OUTPUT_EVENT_BYTES`],
//! bytes that are not UTF-8 becoming U+FFFD.

use std::collections::VecDeque;

use duet_wire::stream::OUTPUT_EVENT_BYTES;

use crate::output::incomplete_utf8_tail;

/// The longest a UTF-8 character is: how far a trim may go past the bound
/// to reach the start of one.
const MAX_CHAR_BYTES: usize = 4;

pub struct Kept {
    bytes: VecDeque<u8>,
    /// The most bytes kept.
    capacity: usize,
    /// All bytes ever added.
    total: u64,
}

/// One output event's worth of the kept bytes.
#[derive(Debug, PartialEq, Eq)]
pub struct Piece {
    pub offset: u64,
    pub bytes: u64,
    pub data: String,
}

impl Kept {
    /// Keeps the newest `capacity` bytes.
    pub fn new(capacity: usize) -> Self {
        Kept {
            bytes: VecDeque::new(),
            capacity,
            total: 0,
        }
    }

    pub fn total(&self) -> u64 {
        self.total
    }

    /// The offset of the oldest byte kept.
    pub fn start(&self) -> u64 {
        self.total - self.bytes.len() as u64
    }

    pub fn add(&mut self, bytes: &[u8]) {
        self.bytes.extend(bytes);
        self.total += bytes.len() as u64;
        if self.bytes.len() > self.capacity {
            let mut cut = self.bytes.len() - self.capacity;
            let bound = (cut + MAX_CHAR_BYTES - 1).min(self.bytes.len());
            while cut < bound && is_continuation(self.bytes[cut]) {
                cut += 1;
            }
            self.bytes.drain(..cut);
        }
    }

    /// The next piece from offset `from` (from the oldest byte kept if that
    /// is later) that ends at offset `to` at the latest, or `None` if there
    /// is none yet. Unless `whole`, a character whose last bytes have not
    /// come yet (it is cut at `to`) waits for them.
    pub fn piece(&self, from: u64, to: u64, whole: bool) -> Option<Piece> {
        let start = self.start();
        let offset = from.max(start);
        let skip = usize::try_from(offset - start).ok()?;
        let until = usize::try_from(to.min(self.total).saturating_sub(start)).ok()?;
        if skip >= until {
            return None;
        }
        let end = until.min(skip + OUTPUT_EVENT_BYTES);
        let mut raw: Vec<u8> = self.bytes.range(skip..end).copied().collect();
        if !whole || end < until {
            raw.truncate(raw.len() - incomplete_utf8_tail(&raw));
        }
        let (used, data) = text_piece(&raw);
        (used > 0).then_some(Piece {
            offset,
            bytes: used as u64,
            data,
        })
    }
}

fn is_continuation(byte: u8) -> bool {
    byte & 0xC0 == 0x80
}

/// The longest start of `raw` whose text (bad bytes as U+FFFD) fits in
/// [`OUTPUT_EVENT_BYTES`] and ends between characters: the bytes it takes
/// and the text.
fn text_piece(raw: &[u8]) -> (usize, String) {
    let mut data = String::new();
    let mut used = 0;
    for chunk in raw.utf8_chunks() {
        let valid = chunk.valid();
        let room = OUTPUT_EVENT_BYTES - data.len();
        if valid.len() > room {
            let cut = valid.floor_char_boundary(room);
            data.push_str(&valid[..cut]);
            return (used + cut, data);
        }
        data.push_str(valid);
        used += valid.len();
        if !chunk.invalid().is_empty() {
            if data.len() + char::REPLACEMENT_CHARACTER.len_utf8() > OUTPUT_EVENT_BYTES {
                break;
            }
            data.push(char::REPLACEMENT_CHARACTER);
            used += chunk.invalid().len();
        }
    }
    (used, data)
}

#[cfg(test)]
mod tests {
    use super::*;

    const CAPACITY: usize = 1024 * 1024;

    /// Every piece from `from` on, as a reader of an ended job gets them.
    fn read_all(kept: &Kept, mut from: u64) -> Vec<Piece> {
        let mut pieces = Vec::new();
        while let Some(piece) = kept.piece(from, kept.total(), true) {
            from = piece.offset + piece.bytes;
            pieces.push(piece);
        }
        pieces
    }

    #[test]
    fn pieces_add_up_and_fit_an_event() {
        let mut kept = Kept::new(CAPACITY);
        let text = "é".repeat(OUTPUT_EVENT_BYTES);
        kept.add(text.as_bytes());
        let pieces = read_all(&kept, 0);
        assert!(pieces.iter().all(|p| p.data.len() <= OUTPUT_EVENT_BYTES));
        assert_eq!(pieces[0].offset, 0);
        let joined: String = pieces.iter().map(|p| p.data.as_str()).collect();
        assert_eq!(joined, text);
        let bytes: u64 = pieces.iter().map(|p| p.bytes).sum();
        assert_eq!(bytes, kept.total());
    }

    #[test]
    fn a_split_character_waits_for_its_end_while_the_job_runs() {
        let mut kept = Kept::new(CAPACITY);
        let euro = "€".as_bytes();
        kept.add(&[b'a', euro[0]]);
        let piece = kept.piece(0, kept.total(), false).expect("piece");
        assert_eq!((piece.bytes, piece.data.as_str()), (1, "a"));
        assert_eq!(kept.piece(1, kept.total(), false), None);
        kept.add(&euro[1..]);
        let piece = kept.piece(1, kept.total(), false).expect("piece");
        assert_eq!(
            (piece.offset, piece.bytes, piece.data.as_str()),
            (1, 3, "€")
        );
    }

    #[test]
    fn a_piece_ends_at_its_bound() {
        let mut kept = Kept::new(CAPACITY);
        kept.add(b"before|after");
        let piece = kept.piece(0, 7, true).expect("piece");
        assert_eq!(
            (piece.offset, piece.bytes, piece.data.as_str()),
            (0, 7, "before|")
        );
        assert_eq!(kept.piece(7, 7, true), None);
        let piece = kept.piece(7, kept.total(), true).expect("piece");
        assert_eq!(piece.data, "after");
        assert_eq!(kept.piece(kept.total() + 5, kept.total(), true), None);
    }

    #[test]
    fn bad_bytes_become_replacement_characters_and_count_as_bytes() {
        let mut kept = Kept::new(CAPACITY);
        kept.add(&[0xFF; OUTPUT_EVENT_BYTES]);
        let pieces = read_all(&kept, 0);
        assert!(pieces.iter().all(|p| p.data.len() <= OUTPUT_EVENT_BYTES));
        let bytes: u64 = pieces.iter().map(|p| p.bytes).sum();
        assert_eq!(bytes, OUTPUT_EVENT_BYTES as u64);
    }

    #[test]
    fn keeps_the_newest_from_a_character_start() {
        let mut kept = Kept::new(CAPACITY);
        kept.add(b"x");
        kept.add("€".repeat(CAPACITY / 3 + 1).as_bytes());
        // The bound falls inside the first character kept: the rest of it
        // goes too.
        assert_eq!(kept.total(), CAPACITY as u64 + 3);
        assert_eq!(kept.bytes.len(), CAPACITY - 1);
        let first = kept.piece(0, kept.total(), true).expect("piece");
        assert_eq!(first.offset, 4);
        assert!(first.data.starts_with('€'));
        // A reader asking for what is still kept gets exactly that.
        let later = kept.piece(7, kept.total(), true).expect("piece");
        assert_eq!(later.offset, 7);
    }
}

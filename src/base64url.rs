//! Unpadded base64url (RFC 4648 §5), the alphabet of room tokens and of the
//! token a browser offers as a subprotocol. Decoding is strict: a text that
//! is not the canonical encoding of some bytes (a stray character, a length
//! no encoding has, unused low bits that are not zero) decodes to nothing,
//! so that no two texts carry the same bytes and a flipped bit never goes
//! unnoticed.

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

pub fn encode(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let mut bits = 0u32;
        for (i, &b) in chunk.iter().enumerate() {
            bits |= u32::from(b) << (16 - 8 * i);
        }
        for i in 0..=chunk.len() {
            out.push(ALPHABET[(bits >> (18 - 6 * i)) as usize & 63] as char);
        }
    }
    out
}

/// The bytes `text` encodes; `None` unless it is their canonical encoding.
pub fn decode(text: &str) -> Option<Vec<u8>> {
    let value = |c: u8| -> Option<u32> {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'-' => 62,
            b'_' => 63,
            _ => return None,
        };
        Some(u32::from(v))
    };
    if text.len() % 4 == 1 {
        return None;
    }
    let mut out = Vec::with_capacity(text.len() * 3 / 4);
    for chunk in text.as_bytes().chunks(4) {
        let mut bits = 0u32;
        for (i, &c) in chunk.iter().enumerate() {
            bits |= value(c)? << (18 - 6 * i);
        }
        // The bits a short last chunk carries beyond its bytes must be zero.
        let unused = (6 * chunk.len()) % 8;
        if bits & (((1 << unused) - 1) << (24 - 6 * chunk.len())) != 0 {
            return None;
        }
        out.extend_from_slice(&bits.to_be_bytes()[1..chunk.len()]);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_every_length() {
        let bytes: Vec<u8> = (0..=255).collect();
        for n in 0..40 {
            let text = encode(&bytes[..n]);
            assert!(!text.contains('='));
            assert_eq!(decode(&text).as_deref(), Some(&bytes[..n]), "{n}");
        }
        assert_eq!(encode(b"abc"), "YWJj");
        assert_eq!(encode(&[0xfb, 0xff]), "-_8");
    }

    #[test]
    fn only_canonical_texts_decode() {
        assert_eq!(decode("").as_deref(), Some(&b""[..]));
        assert_eq!(decode("YQ").as_deref(), Some(&b"a"[..]));
        assert_eq!(decode("YWI").as_deref(), Some(&b"ab"[..]));
        // The same bytes with unused low bits set.
        for other in [
            "YR", "YWJ", "YWL", "a", "YQ==", "YW+j", "YW/j", "YW j", "***",
        ] {
            assert_eq!(decode(other), None, "{other}");
        }
    }
}

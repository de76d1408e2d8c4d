//! How a request presents a token, and comparing secrets: the bearer token
//! of an `Authorization` header, and a comparison that takes the same time
//! wherever the first difference is, so timing reveals nothing of a token
//! or of a room token's MAC.

const BEARER: &str = "Bearer ";
/// How a WebSocket's subprotocols carry a token (see `feed::event`).
const AUTH_PREFIX: &str = "duet.auth.";

use crate::base64url;

/// The token of an `Authorization: Bearer <token>` header (taken out of it
/// in place: a room token is a few hundred bytes).
pub fn bearer(mut header: String) -> Option<String> {
    header.starts_with(BEARER).then(|| {
        header.drain(..BEARER.len());
        header
    })
}

/// The token a `Sec-WebSocket-Protocol` header carries, if any.
pub fn token_from_protocols(header: &str) -> Option<String> {
    let encoded = header
        .split(',')
        .find_map(|p| p.trim().strip_prefix(AUTH_PREFIX))?;
    String::from_utf8(base64url::decode(encoded)?).ok()
}

/// Whether a presented token is the token, compared in constant time.
pub fn same_token(presented: &str, token: &str) -> bool {
    same_bytes(presented.as_bytes(), token.as_bytes())
}

/// Whether two byte strings are equal, compared in constant time: every
/// byte is looked at, wherever the first difference is. Only the lengths
/// tell in the time it takes (two of different lengths are told apart at
/// once), so a token's length could leak, never its bytes.
pub fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    // Eight bytes at a time: a room token is a few hundred.
    let (words_a, rest_a) = a.as_chunks::<8>();
    let (words_b, rest_b) = b.as_chunks::<8>();
    let words = words_a.iter().zip(words_b);
    let diff = words.fold(0u64, |diff, (x, y)| {
        diff | (u64::from_le_bytes(*x) ^ u64::from_le_bytes(*y))
    });
    let rest = rest_a.iter().zip(rest_b);
    rest.fold(diff, |diff, (x, y)| diff | u64::from(x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn authorized(header: Option<&str>, token: &str) -> bool {
        header
            .and_then(|header| bearer(header.to_owned()))
            .is_some_and(|presented| same_token(&presented, token))
    }

    #[test]
    fn accepts_only_the_exact_token() {
        assert!(authorized(Some("Bearer s3cret"), "s3cret"));
        for header in [
            None,
            Some(""),
            Some("Bearer "),
            Some("Bearer s3cre"),
            Some("Bearer s3crett"),
            Some("bearer s3cret"),
            Some("s3cret"),
            Some("Bearer  s3cret"),
        ] {
            assert!(!authorized(header, "s3cret"), "{header:?}");
        }
    }

    #[test]
    fn tokens_come_as_base64url_subprotocols() {
        // "s3cret/with+odd=chars ü" in base64url without padding.
        let header = "duet.v1, duet.auth.czNjcmV0L3dpdGgrb2RkPWNoYXJzIMO8";
        assert_eq!(
            token_from_protocols(header).as_deref(),
            Some("s3cret/with+odd=chars ü")
        );
        assert_eq!(token_from_protocols("duet.v1"), None);
        assert_eq!(token_from_protocols("duet.auth.***"), None);
        assert_eq!(token_from_protocols("duet.auth.a"), None);
    }

    #[test]
    fn bytes_are_equal_only_when_all_are() {
        assert!(same_bytes(b"", b""));
        assert!(same_bytes(&[1, 2, 3], &[1, 2, 3]));
        for other in [&[1, 2][..], &[1, 2, 3, 0], &[1, 2, 4], &[0, 2, 3]] {
            assert!(!same_bytes(&[1, 2, 3], other), "{other:?}");
        }
        // Whole words and the bytes after them, a difference in any one.
        let long: Vec<u8> = (0..21).collect();
        assert!(same_bytes(&long, &long.clone()));
        for i in 0..long.len() {
            let mut other = long.clone();
            other[i] ^= 0x10;
            assert!(!same_bytes(&long, &other), "byte {i}");
        }
    }
}

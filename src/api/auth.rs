//! How a request presents a token, and comparing secrets: the bearer token
//! of an `Authorization` header, and a comparison that takes the same time
//! wherever the first difference is, so timing reveals nothing of a token
//! or of a room token's MAC.

/// The token of an `Authorization: Bearer <token>` header.
pub fn bearer(header: Option<&str>) -> Option<&str> {
    header?.strip_prefix("Bearer ")
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
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |diff, (x, y)| diff | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn authorized(header: Option<&str>, token: &str) -> bool {
        bearer(header).is_some_and(|presented| same_token(presented, token))
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
    fn bytes_are_equal_only_when_all_are() {
        assert!(same_bytes(b"", b""));
        assert!(same_bytes(&[1, 2, 3], &[1, 2, 3]));
        for other in [&[1, 2][..], &[1, 2, 3, 0], &[1, 2, 4], &[0, 2, 3]] {
            assert!(!same_bytes(&[1, 2, 3], other), "{other:?}");
        }
    }
}

//! Optional bearer-token check for `/api/` routes (on when the
//! `DUET_API_TOKEN` secret is set). The comparison takes the same time
//! wherever the first difference is, so timing reveals nothing of the token.

/// Whether an `Authorization` header carries exactly `Bearer <token>`.
pub fn authorized(header: Option<&str>, token: &str) -> bool {
    let presented = header.and_then(|h| h.strip_prefix("Bearer ")).unwrap_or("");
    same_token(presented, token)
}

/// Whether a presented token is the token, compared in constant time.
pub fn same_token(presented: &str, token: &str) -> bool {
    constant_time_eq(presented.as_bytes(), token.as_bytes())
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    // Lengths are compared in the same pass so that a short guess costs the
    // same as a long one; only the token's length could leak, not its bytes.
    let mut diff = a.len() ^ b.len();
    for i in 0..a.len().max(b.len()) {
        let x = a.get(i).copied().unwrap_or(0);
        let y = b.get(i).copied().unwrap_or(0);
        diff |= usize::from(x ^ y);
    }
    diff == 0
}

#[cfg(test)]
mod tests {
    use super::*;

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
}

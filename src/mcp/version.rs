//! The MCP revisions a room speaks, and how a request's is found. Two eras
//! share the endpoint: the 2026-07-28 revision, stateless, where every
//! request names its revision in `_meta` and in headers; and the revisions
//! before it, which agree on one with `initialize` and then name it in the
//! `MCP-Protocol-Version` header (2025-03-26 had no header: a request
//! without one is of that revision, as the later ones say).

/// The stateless revision.
pub const MODERN: &str = "2026-07-28";
/// The revisions negotiated by `initialize`, newest first.
pub const LEGACY: [&str; 3] = ["2025-11-25", "2025-06-18", "2025-03-26"];
/// What a request of the legacy era without the header speaks, and the one
/// revision that allows batches.
pub const UNNAMED: &str = "2025-03-26";
/// Every revision served, newest first, as `server/discover` and the
/// version errors list them.
pub const SUPPORTED: [&str; 4] = [MODERN, LEGACY[0], LEGACY[1], LEGACY[2]];

/// The `_meta` keys of a 2026-07-28 request.
pub const META_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
pub const META_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
pub const META_CLIENT: &str = "io.modelcontextprotocol/clientInfo";
pub const META_SERVER: &str = "io.modelcontextprotocol/serverInfo";

/// The revision `initialize` answers: the one asked for if it is served in
/// that era, else the newest (the client then decides whether it can use
/// it; the revisions say to answer, not to refuse).
pub fn negotiate(requested: Option<&str>) -> &'static str {
    LEGACY
        .into_iter()
        .find(|&version| Some(version) == requested)
        .unwrap_or(LEGACY[0])
}

/// The legacy revision a request names in its header (none: [`UNNAMED`]);
/// `None` when it names one not served in that era.
pub fn legacy_of(header: Option<&str>) -> Option<&'static str> {
    match header {
        None => Some(UNNAMED),
        Some(header) => LEGACY.into_iter().find(|&version| version == header),
    }
}

/// A header value as the 2026-07-28 revision sends it: as it is, or
/// `=?base64?…?=` for text that is not plain ASCII.
pub fn header_text(value: &str) -> Option<String> {
    let Some(encoded) = value
        .strip_prefix("=?base64?")
        .and_then(|rest| rest.strip_suffix("?="))
    else {
        return Some(value.to_owned());
    };
    let url_safe: String = encoded
        .trim_end_matches('=')
        .chars()
        .map(|c| match c {
            '+' => '-',
            '/' => '_',
            c => c,
        })
        .collect();
    String::from_utf8(crate::base64url::decode(&url_safe)?).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn initialize_echoes_a_served_revision_else_the_newest() {
        for version in LEGACY {
            assert_eq!(negotiate(Some(version)), version);
        }
        assert_eq!(negotiate(Some("2024-11-05")), "2025-11-25");
        assert_eq!(negotiate(Some(MODERN)), "2025-11-25");
        assert_eq!(negotiate(None), "2025-11-25");
    }

    #[test]
    fn a_missing_header_is_2025_03_26() {
        assert_eq!(legacy_of(None), Some("2025-03-26"));
        assert_eq!(legacy_of(Some("2025-06-18")), Some("2025-06-18"));
        assert_eq!(legacy_of(Some("2024-11-05")), None);
        assert_eq!(legacy_of(Some("banana")), None);
    }

    #[test]
    fn header_values_may_be_base64() {
        assert_eq!(header_text("run_command").unwrap(), "run_command");
        assert_eq!(header_text("=?base64?w6lsw6h2ZQ==?=").unwrap(), "élève");
        assert_eq!(header_text("=?base64?+/+/?=").unwrap_or_default(), "");
        assert!(header_text("=?base64?%%?=").is_none());
    }
}

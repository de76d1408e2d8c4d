//! What keeps another site's pages from using a room through a visitor's
//! browser. Without a token (the default, and `npm run dev`) a page on any
//! origin could otherwise post a command as `text/plain`, which a browser
//! sends without asking (no CORS preflight), and watch its output over the
//! live feed, which browsers open to any origin. So:
//!
//! - the JSON routes take only `Content-Type: application/json`, which a
//!   browser sends cross-site only after a preflight this worker never
//!   answers;
//! - a request that changes a room, and the live feed, are refused when they
//!   carry an `Origin` other than the worker's own. Browsers send `Origin`
//!   on every such request; the Go server and curl send none, and are let
//!   through.

use super::route::{origin_of, Action};
use super::ApiError;

/// Refuses a request for `action` at `url` that another site's page could
/// have sent: from a foreign `Origin` (403), or to a JSON route with another
/// content type (415).
pub fn check(
    action: Action,
    url: &str,
    origin: Option<&str>,
    content_type: Option<&str>,
) -> Result<(), ApiError> {
    if action.needs_own_origin() && !same_origin(origin, url) {
        return Err(ApiError::CrossSite(origin.unwrap_or_default().to_owned()));
    }
    if action.has_body() && !is_json(content_type) {
        return Err(ApiError::NotJson);
    }
    Ok(())
}

/// Whether a `Content-Type` header names JSON: `application/json`, any
/// case, with or without parameters such as `; charset=utf-8`.
pub fn is_json(content_type: Option<&str>) -> bool {
    content_type.is_some_and(|value| {
        let media_type = value.split(';').next().unwrap_or_default();
        media_type.trim().eq_ignore_ascii_case("application/json")
    })
}

/// Whether a request to `url` with this `Origin` header may go on: no
/// `Origin` at all (not a browser), or exactly the worker's own origin
/// (`scheme://host[:port]` of the URL it was reached at). `null`, which
/// browsers send from sandboxed frames and local files, is foreign.
pub fn same_origin(origin: Option<&str>, url: &str) -> bool {
    origin.is_none_or(|origin| origin.eq_ignore_ascii_case(origin_of(url)))
}

#[cfg(test)]
mod tests {
    use super::*;

    const URL: &str = "https://duet.example.com/api/rooms/r/sandbox/exec";
    const JSON: Option<&str> = Some("application/json");

    #[test]
    fn what_changes_a_room_or_shows_it_comes_from_the_workers_own_pages() {
        let evil = Some("https://evil.example");
        for action in [
            Action::SendMessage,
            Action::Exec,
            Action::Cleanup,
            Action::Live,
        ] {
            let e = check(action, URL, evil, JSON).unwrap_err();
            assert_eq!(e.status(), 403, "{action:?}");
            assert!(e.to_string().contains("https://evil.example"));
            assert!(
                check(action, URL, None, JSON).is_ok(),
                "{action:?} without Origin"
            );
            let own = Some("https://duet.example.com");
            assert!(
                check(action, URL, own, JSON).is_ok(),
                "{action:?} from its own page"
            );
        }
        // Reading history changes nothing, and a foreign page cannot read the answer.
        assert!(check(Action::History, URL, evil, None).is_ok());
    }

    #[test]
    fn json_routes_take_json_only() {
        for action in [Action::SendMessage, Action::Exec] {
            for refused in [
                None,
                Some("text/plain"),
                Some("application/x-www-form-urlencoded"),
            ] {
                let e = check(action, URL, None, refused).unwrap_err();
                assert_eq!(e.status(), 415, "{action:?} {refused:?}");
            }
            let utf8 = Some("application/json; charset=utf-8");
            assert!(check(action, URL, None, utf8).is_ok());
        }
        for action in [Action::Cleanup, Action::Live, Action::History] {
            assert!(
                check(action, URL, None, None).is_ok(),
                "{action:?} has no body"
            );
        }
        // A foreign page is refused as such, whatever it sent.
        let e = check(Action::Exec, URL, Some("null"), Some("text/plain")).unwrap_err();
        assert_eq!(e.status(), 403);
    }

    #[test]
    fn json_with_or_without_parameters() {
        for ok in [
            "application/json",
            "application/json; charset=utf-8",
            "Application/JSON;charset=UTF-8",
            " application/json ",
        ] {
            assert!(is_json(Some(ok)), "{ok}");
        }
        for refused in [
            None,
            Some(""),
            Some("text/plain"),
            Some("text/plain; charset=application/json"),
            Some("application/x-www-form-urlencoded"),
            Some("multipart/form-data; boundary=x"),
            Some("application/jsonx"),
            Some("application/json-seq"),
        ] {
            assert!(!is_json(refused), "{refused:?}");
        }
    }

    #[test]
    fn only_the_workers_own_origin_or_none() {
        let url = "https://duet.example.com/api/rooms/r/sandbox/exec?x=1";
        assert!(same_origin(None, url));
        assert!(same_origin(None, URL));
        assert!(same_origin(Some("https://duet.example.com"), url));
        assert!(same_origin(Some("HTTPS://Duet.Example.com"), url));
        for foreign in [
            "https://evil.example",
            "http://duet.example.com",
            "https://duet.example.com:8443",
            "https://duet.example.com.evil.example",
            "https://sub.duet.example.com",
            "null",
            "",
        ] {
            assert!(!same_origin(Some(foreign), url), "{foreign}");
        }
        let local = "http://127.0.0.1:8788/api/rooms/r/live";
        assert!(same_origin(Some("http://127.0.0.1:8788"), local));
        assert!(!same_origin(Some("http://127.0.0.1:9999"), local));
        assert!(!same_origin(Some("http://localhost:8788"), local));
    }
}

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
//!
//! "The worker's own" is never read from the request: a page that rebinds
//! its own name to this machine's address (DNS rebinding) sends requests
//! whose `Host` and `Origin` are both its own, and would pass any check that
//! compares one with the other. The worker knows its hosts instead
//! ([`Hosts`]): `DUET_HOSTS` lists the deployment's, and without it only the
//! loopback names are served, as `npm run dev` is reached. A request to any
//! other host is refused (421) before anything else is looked at, and an
//! `Origin` is judged against the known hosts alone.

use super::route::{origin_of, Action};
use super::ApiError;

/// The loopback names a worker with no `DUET_HOSTS` answers at, on any
/// port: a rebinding page cannot send one as its `Host`, since a browser
/// sends the name the page was loaded from.
const LOOPBACK: [&str; 3] = ["localhost", "127.0.0.1", "[::1]"];

/// The hosts this worker answers at: `DUET_HOSTS`, a comma-separated list
/// of `host` or `host:port` (`duet.example.com, duet.acme.workers.dev`),
/// served over https; unset, the loopback names on any port, over http.
pub struct Hosts<'a> {
    listed: Option<&'a str>,
}

impl<'a> Hosts<'a> {
    pub fn new(listed: Option<&'a str>) -> Self {
        Self { listed }
    }

    /// Refuses (421) a request whose URL, built by the runtime from its
    /// `Host`, names none of the worker's hosts.
    pub fn admit(&self, url: &str) -> Result<(), ApiError> {
        let host = host_of(url);
        if self.own_host(host) {
            return Ok(());
        }
        let known = match self.listed {
            Some(listed) => listed.to_owned(),
            None => format!("{} (set DUET_HOSTS to serve others)", LOOPBACK.join(", ")),
        };
        Err(ApiError::MisdirectedHost {
            host: host.to_owned(),
            known,
        })
    }

    fn own_host(&self, host: &str) -> bool {
        match self.listed {
            Some(listed) => listed
                .split(',')
                .any(|own| own.trim().eq_ignore_ascii_case(host)),
            None => LOOPBACK
                .iter()
                .any(|name| name.eq_ignore_ascii_case(name_of(host))),
        }
    }

    /// Whether `origin` is one of the worker's own for a request to `url`
    /// (whose host [`Self::admit`] let through): a listed host over https;
    /// without a list, the loopback name and port the request reached, over
    /// http. `null`, which browsers send from sandboxed frames and local
    /// files, is foreign.
    fn own_origin(&self, origin: &str, url: &str) -> bool {
        let (scheme, host) = origin.split_once("://").unwrap_or_default();
        let (want, reached) = match self.listed {
            Some(_) => ("https", true),
            None => ("http", host.eq_ignore_ascii_case(host_of(url))),
        };
        scheme.eq_ignore_ascii_case(want) && reached && self.own_host(host)
    }

    /// Refuses a request for `action` at `url` that another site's page
    /// could have sent: from a foreign `Origin` (403), or to a JSON route
    /// with another content type (415).
    pub fn check(
        &self,
        action: Action,
        url: &str,
        origin: Option<&str>,
        content_type: Option<&str>,
    ) -> Result<(), ApiError> {
        let own = origin.is_none_or(|origin| self.own_origin(origin, url));
        if action.needs_own_origin() && !own {
            return Err(ApiError::CrossSite(origin.unwrap_or_default().to_owned()));
        }
        if action.has_body() && !is_json(content_type) {
            return Err(ApiError::NotJson);
        }
        Ok(())
    }
}

/// `host[:port]` of a URL as the runtime serialises it.
fn host_of(url: &str) -> &str {
    let origin = origin_of(url);
    origin.split_once("://").map_or(origin, |(_, host)| host)
}

/// The name of `host[:port]`, an IPv6 address in its brackets.
fn name_of(host: &str) -> &str {
    let end = match host.strip_prefix('[') {
        Some(rest) => rest.find(']').map_or(host.len(), |i| i + 2),
        None => host.find(':').unwrap_or(host.len()),
    };
    &host[..end]
}

/// Whether a `Content-Type` header names JSON: `application/json`, any
/// case, with or without parameters such as `; charset=utf-8`.
pub fn is_json(content_type: Option<&str>) -> bool {
    content_type.is_some_and(|value| {
        let media_type = value.split(';').next().unwrap_or_default();
        media_type.trim().eq_ignore_ascii_case("application/json")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const URL: &str = "https://duet.example.com/api/rooms/r/sandbox/exec";
    const LISTED: Hosts = Hosts {
        listed: Some("duet.example.com, duet.acme.workers.dev"),
    };
    const LOCAL: Hosts = Hosts { listed: None };
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
            let e = LISTED.check(action, URL, evil, JSON).unwrap_err();
            assert_eq!(e.status(), 403, "{action:?}");
            assert!(e.to_string().contains("https://evil.example"));
            assert!(
                LISTED.check(action, URL, None, JSON).is_ok(),
                "{action:?} without Origin"
            );
            let own = Some("https://duet.example.com");
            assert!(
                LISTED.check(action, URL, own, JSON).is_ok(),
                "{action:?} from its own page"
            );
        }
        // Reading history changes nothing, and a foreign page cannot read the answer.
        assert!(LISTED.check(Action::History, URL, evil, None).is_ok());
    }

    #[test]
    fn json_routes_take_json_only() {
        for action in [Action::SendMessage, Action::Exec] {
            for refused in [
                None,
                Some("text/plain"),
                Some("application/x-www-form-urlencoded"),
            ] {
                let e = LISTED.check(action, URL, None, refused).unwrap_err();
                assert_eq!(e.status(), 415, "{action:?} {refused:?}");
            }
            let utf8 = Some("application/json; charset=utf-8");
            assert!(LISTED.check(action, URL, None, utf8).is_ok());
        }
        for action in [Action::Cleanup, Action::Live, Action::History] {
            assert!(
                LISTED.check(action, URL, None, None).is_ok(),
                "{action:?} has no body"
            );
        }
        // A foreign page is refused as such, whatever it sent.
        let e = LISTED
            .check(Action::Exec, URL, Some("null"), Some("text/plain"))
            .unwrap_err();
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
    fn only_the_listed_hosts_are_served() {
        for own in [
            URL,
            "https://DUET.example.com/api/rooms/r/live",
            "https://duet.acme.workers.dev/api/rooms/r/live",
        ] {
            assert!(LISTED.admit(own).is_ok(), "{own}");
        }
        for foreign in [
            "https://attacker.example/api/rooms/r/live",
            "https://duet.example.com.attacker.example/api/rooms/r/live",
            "https://sub.duet.example.com/api/rooms/r/live",
            "https://duet.example.com:8443/api/rooms/r/live",
            "http://localhost:8788/api/rooms/r/live",
        ] {
            let e = LISTED.admit(foreign).unwrap_err();
            assert_eq!(e.status(), 421, "{foreign}");
            assert!(e
                .to_string()
                .contains("duet.example.com, duet.acme.workers.dev"));
        }
    }

    #[test]
    fn without_a_list_only_loopback_names_are_served() {
        for own in [
            "http://localhost:8788/api/rooms/r/live",
            "http://127.0.0.1:8788/api/rooms/r/live",
            "http://[::1]:8788/api/rooms/r/live",
            "http://LocalHost:40123/api/rooms/r/live",
        ] {
            assert!(LOCAL.admit(own).is_ok(), "{own}");
        }
        // A rebinding page's own name, whatever address it now resolves to.
        for foreign in [
            "http://attacker.example:8788/api/rooms/r/live",
            "http://localhost.attacker.example:8788/api/rooms/r/live",
            "http://127.0.0.1.nip.example:8788/api/rooms/r/live",
            "http://[::2]:8788/api/rooms/r/live",
            "http://localhost.:8788/api/rooms/r/live",
        ] {
            let e = LOCAL.admit(foreign).unwrap_err();
            assert_eq!(e.status(), 421, "{foreign}");
            assert!(e.to_string().contains("DUET_HOSTS"));
        }
    }

    #[test]
    fn an_origin_is_judged_against_the_known_hosts_never_the_requests() {
        let url = "https://duet.example.com/api/rooms/r/sandbox/exec?x=1";
        let own = |hosts: &Hosts, origin: &str, url: &str| {
            hosts.check(Action::Exec, url, Some(origin), JSON).is_ok()
        };
        assert!(own(&LISTED, "https://duet.example.com", url));
        assert!(own(&LISTED, "HTTPS://Duet.Example.com", url));
        assert!(own(&LISTED, "https://duet.acme.workers.dev", url));
        for foreign in [
            "https://evil.example",
            "http://duet.example.com",
            "https://duet.example.com:8443",
            "https://duet.example.com.evil.example",
            "https://sub.duet.example.com",
            "null",
            "",
        ] {
            assert!(!own(&LISTED, foreign, url), "{foreign}");
        }
        let local = "http://127.0.0.1:8788/api/rooms/r/live";
        assert!(own(&LOCAL, "http://127.0.0.1:8788", local));
        let v6 = "http://[::1]:8788/api/rooms/r/live";
        assert!(own(&LOCAL, "http://[::1]:8788", v6));
        for foreign in [
            "http://localhost:8788",
            "http://127.0.0.1:9999",
            "http://localhost",
            "https://127.0.0.1:8788",
            "http://attacker.example:8788",
            "null",
        ] {
            assert!(!own(&LOCAL, foreign, local), "{foreign}");
        }
    }
}

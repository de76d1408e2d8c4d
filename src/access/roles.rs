//! Who may do what in a room, as plain data. Three roles, each with the
//! rights of the one below: a *watcher* reads the history and watches the
//! live feed; a *writer* also sends messages and runs commands; an *owner*
//! also deletes the room and invites and revokes. What each public route and
//! each frame a watcher's socket may send needs is said here, and only
//! here, by exhaustive matches: a new route or frame does not compile until
//! it names its role.
//!
//! How a deployment admits anyone at all is its [`Mode`]: in token mode
//! every `/api/` request carries the service token (`DUET_API_TOKEN`, an
//! owner in every room) or a room token (`access::token`); in open mode, which
//! must be chosen by name, everyone is an owner everywhere.

use super::token::Claims;
use crate::api::role::RoomRole;
use crate::api::route::Action;
use crate::api::ApiError;

/// The role a public route needs.
pub fn needed(action: Action) -> RoomRole {
    match action {
        // An MCP client connects as a watcher; each tool then needs its
        // own role (`mcp::tools`).
        // A job's output is on the feed, which watchers see.
        Action::History
        | Action::Live
        | Action::Policy
        | Action::Approvals
        | Action::Mcp
        | Action::Jobs
        | Action::Job { .. }
        | Action::ReadFile
        // Typing into it is a writer's (`terminal::FromClient::needed`).
        | Action::Terminal => RoomRole::Watcher,
        // The kept archive holds the files a failed wake could not bring
        // back, for a writer to put back.
        Action::SendMessage
        | Action::Exec
        | Action::KeptArchive
        | Action::Decide { .. }
        | Action::StartJob
        | Action::StopJob { .. }
        | Action::WriteFile
        | Action::DeleteFile => RoomRole::Writer,
        // The audit names who did what, over the room's whole life.
        Action::Cleanup | Action::Invite | Action::Revoke | Action::SetPolicy | Action::Audit => {
            RoomRole::Owner
        }
    }
}

/// Refuses `action` to someone holding `held` (403, naming the role needed).
pub fn allow(held: RoomRole, action: Action) -> Result<(), ApiError> {
    let needed = needed(action);
    match held >= needed {
        true => Ok(()),
        false => Err(ApiError::Forbidden { needed, held }),
    }
}

/// Refuses `action` in `room` to the holder of a room token with `claims`:
/// a token of another room (401), or a role below the one needed (403).
/// The token's expiry and its MAC are checked before (the front door), its
/// generation after (the room's object).
pub fn admit(claims: &Claims, room: &str, action: Action) -> Result<(), ApiError> {
    if claims.room != room {
        return Err(ApiError::OtherRoom);
    }
    allow(claims.role, action)
}

/// How the deployment admits requests to `/api/`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Everyone is an owner in every room.
    Open,
    /// The service token or a room token is needed.
    Token,
}

/// The mode of a deployment whose `DUET_ACCESS` is `access`, with or without
/// `DUET_API_TOKEN`. A service token always means token mode, whatever
/// `DUET_ACCESS` says: a deployment is never open by a setting's mistake.
/// Without one, only `open`, by name, is open; anything else (unset
/// included) is a configuration error, which the API answers as a 503
/// rather than letting anyone in.
pub fn mode(access: Option<&str>, service_token_set: bool) -> Result<Mode, String> {
    if service_token_set {
        return Ok(Mode::Token);
    }
    match access.map(str::trim) {
        Some("open") => Ok(Mode::Open),
        None | Some("token") => Err(
            "access is by token (DUET_ACCESS) but DUET_API_TOKEN is not set: set it with \
             `npx wrangler secret put DUET_API_TOKEN`, or choose DUET_ACCESS = \"open\" \
             (anyone may then use every room)"
                .into(),
        ),
        Some(other) => Err(format!(
            "DUET_ACCESS is {other:?}; set it to \"token\" or \"open\""
        )),
    }
}

/// Who asked for a command or decided one, as the audit and the feed name
/// them. A room token names its holder (or at least its role), and that
/// stands: what its client sends as `userId` is self-declared and shown
/// beside it, marked so (`bo (says "ana")`). An owner's `userId` (the
/// service token's server naming its own users, or anyone in open mode,
/// where there is nothing better to go by) is taken as sent.
pub fn named(claims: Option<&Claims>, user_id: Option<String>) -> Option<String> {
    let Some(claims) = claims else {
        return user_id;
    };
    let holder = claims.name.as_deref().unwrap_or(claims.role.name());
    Some(match user_id {
        Some(said) if said != holder => format!("{holder} (says {said:?})"),
        _ => holder.to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const ACTIONS: [Action; 8] = [
        Action::SendMessage,
        Action::History,
        Action::Exec,
        Action::KeptArchive,
        Action::Cleanup,
        Action::Live,
        Action::Invite,
        Action::Revoke,
    ];

    #[test]
    fn a_room_tokens_name_stands_and_a_userid_beside_it_is_self_declared() {
        let claims = |name: Option<&str>| Claims {
            room: "r".into(),
            role: RoomRole::Writer,
            expires_at: 1,
            generation: "g".into(),
            name: name.map(str::to_owned),
        };
        let said = |s: &str| Some(s.to_owned());
        let bo = claims(Some("bo"));
        assert_eq!(named(Some(&bo), None).as_deref(), Some("bo"));
        assert_eq!(named(Some(&bo), said("bo")).as_deref(), Some("bo"));
        assert_eq!(
            named(Some(&bo), said("ana (owner)")).as_deref(),
            Some(r#"bo (says "ana (owner)")"#)
        );
        let unnamed = claims(None);
        assert_eq!(
            named(Some(&unnamed), said("ana")).as_deref(),
            Some(r#"writer (says "ana")"#)
        );
        assert_eq!(named(Some(&unnamed), None).as_deref(), Some("writer"));
        // The service token's server, or open mode: the userId as sent.
        assert_eq!(named(None, said("ana")).as_deref(), Some("ana"));
        assert_eq!(named(None, None), None);
    }

    #[test]
    fn roles_are_ordered_and_named() {
        assert!(RoomRole::Watcher < RoomRole::Writer && RoomRole::Writer < RoomRole::Owner);
        for role in RoomRole::ALL {
            assert_eq!(RoomRole::parse(role.name()), Some(role));
            assert_eq!(
                serde_json::to_value(role).unwrap(),
                serde_json::json!(role.name())
            );
        }
        assert_eq!(RoomRole::parse("Owner"), None);
        assert_eq!(RoomRole::parse("admin"), None);
    }

    #[test]
    fn what_each_role_may_do() {
        let may = |role: RoomRole| -> Vec<&str> {
            ACTIONS
                .into_iter()
                .filter(|&a| allow(role, a).is_ok())
                .map(Action::name)
                .collect()
        };
        assert_eq!(may(RoomRole::Watcher), ["history", "live"]);
        assert_eq!(
            may(RoomRole::Writer),
            ["message", "history", "exec", "archive", "live"]
        );
        assert_eq!(may(RoomRole::Owner).len(), ACTIONS.len());
        let e = allow(RoomRole::Watcher, Action::Exec).unwrap_err();
        assert_eq!(e.status(), 403);
        assert!(e.to_string().contains("writer"), "{e}");
    }

    #[test]
    fn a_room_token_admits_its_room_and_role_only() {
        let claims = Claims {
            room: "r1".into(),
            role: RoomRole::Writer,
            expires_at: 0,
            generation: "g".into(),
            name: None,
        };
        assert!(admit(&claims, "r1", Action::Exec).is_ok());
        let status = |room, action| admit(&claims, room, action).unwrap_err().status();
        assert_eq!(status("r2", Action::History), 401);
        assert_eq!(status("r1x", Action::History), 401);
        assert_eq!(status("r1", Action::Revoke), 403);
    }

    #[test]
    fn open_only_by_name_and_never_with_a_service_token() {
        assert_eq!(mode(Some("open"), false), Ok(Mode::Open));
        assert_eq!(mode(Some(" open "), false), Ok(Mode::Open));
        for access in [None, Some("open"), Some("token"), Some("opne")] {
            assert_eq!(mode(access, true), Ok(Mode::Token), "{access:?}");
        }
        let unset = mode(None, false).unwrap_err();
        assert!(unset.contains("DUET_API_TOKEN is not set"), "{unset}");
        assert_eq!(mode(Some("token"), false).unwrap_err(), unset);
        for typo in ["opne", "Open", "off", ""] {
            let e = mode(Some(typo), false).unwrap_err();
            assert!(e.contains("DUET_ACCESS is"), "{typo}: {e}");
        }
    }
}

//! The invite routes' shapes: `POST /api/rooms/{roomId}/invites` makes a room
//! token for someone to join with, `DELETE` ends every one of the room's.
//! The token rides in the link's URL fragment, which browsers never send to
//! a server, so no log or referrer ever holds it.

use serde::Serialize;

use super::role::RoomRole;

/// A validated `POST .../invites` body.
#[derive(Debug, PartialEq, Eq)]
pub struct InviteRequest {
    pub role: RoomRole,
    pub ttl_seconds: u64,
    pub name: Option<String>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct InviteResponse {
    pub token: String,
    pub role: RoomRole,
    /// Milliseconds since the Unix epoch.
    pub expires_at: u64,
    pub link: String,
}

/// `DELETE .../invites`. A caller that revoked with a room token of its own
/// ended that one too, and gets `invite`, an owner's token like it in the
/// new generation, to stay in.
#[derive(Debug, Serialize)]
pub struct RevokeResponse {
    pub revoked: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub invite: Option<InviteResponse>,
}

/// The link that opens `room`'s page at `origin` with `token`.
pub fn link(origin: &str, room: &str, token: &str) -> String {
    // Room ids and tokens need no escaping in a URL.
    format!("{origin}/rooms/{room}#token={token}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_token_rides_in_the_fragment() {
        assert_eq!(
            link("https://duet.example", "r-1", "duet1.a.b"),
            "https://duet.example/rooms/r-1#token=duet1.a.b"
        );
        let answer = InviteResponse {
            token: "t".into(),
            role: RoomRole::Watcher,
            expires_at: 5,
            link: "l".into(),
        };
        assert_eq!(
            serde_json::to_value(&answer).unwrap(),
            serde_json::json!({"token": "t", "role": "watcher", "expiresAt": 5, "link": "l"})
        );
    }
}

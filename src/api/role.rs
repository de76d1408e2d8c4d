//! The three roles of a room, as the API names them (in room tokens,
//! invites, errors and the feed's presence). Which role each route and
//! feed message needs is the access rules' (`access::roles`).

use serde::{Deserialize, Serialize};

/// What someone may do in a room; each role may do what the ones before
/// it may.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RoomRole {
    Watcher,
    Writer,
    Owner,
}

impl RoomRole {
    pub const ALL: [Self; 3] = [Self::Watcher, Self::Writer, Self::Owner];

    pub fn name(self) -> &'static str {
        match self {
            Self::Watcher => "watcher",
            Self::Writer => "writer",
            Self::Owner => "owner",
        }
    }

    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|role| role.name() == name)
    }
}

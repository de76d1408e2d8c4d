//! The room layer: what a room's two Durable Objects share, below both. Each
//! object reaches the other only through [`calls`], both keep the room's
//! lifetime by one [`clock`], and both check room tokens against the room's
//! generation by [`access`]. The crate docs show where it stands among the
//! other floors.

pub mod calls;
pub mod clock;

pub use calls::{Asked, Call};

//! What a room's two Durable Objects share, below both: which object serves
//! what, and every call between them ([`calls`]), and the room's lifetime
//! kept by one [`clock`]. The crate docs show where it stands among the
//! other floors.

pub mod calls;
pub mod clock;

//! Room sandboxes: the Sandbox Durable Object (`sandbox-{roomId}`), which
//! drives sandboxd in a container, keeps a sleeping room's files, and holds
//! the room's live feed (`feed`) and audit (`approvals::audit`), since the
//! commands they record run here. The DuetAgent reaches it through
//! `room::calls`.

mod deadline;
mod files;
mod follow;
mod object;
mod sandboxd;
mod saved;
mod stream;
mod terminal;

pub use object::Sandbox;

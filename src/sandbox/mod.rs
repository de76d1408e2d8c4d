//! Room sandboxes: the Sandbox Durable Object (`sandbox-{roomId}`), which
//! drives sandboxd in a container, keeps a sleeping room's files and holds
//! the room's live feed. The DuetAgent reaches it through `room::calls`.

mod deadline;
mod object;
mod sandboxd;
mod saved;
mod stream;

pub use object::Sandbox;

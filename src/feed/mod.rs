//! The room's live feed: what watchers receive and may send, as typed
//! events ([`event`]), the room's log they resume from ([`log`], in the
//! Sandbox object's storage), and the fan-out to the sockets with presence
//! and heartbeats ([`fanout`]). The events and their rules are pure; `log`
//! and `fanout` are the runtime glue.

pub mod event;
pub mod fanout;
pub mod log;

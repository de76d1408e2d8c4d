//! Thin glue between the pure API modules and the Workers runtime: bounded
//! waits, bindings, the AI binding's options, the container methods workers-rs lacks, how futures are
//! woken, the clock, bounded body reads, requests sent, JSON responses,
//! request logs, settings, fresh ids, the key room tokens are signed with,
//! SQLite rows read.

pub mod ai_options;
pub mod bindings;
pub mod body;
pub mod clock;
pub mod config;
pub mod container;
pub mod internal;
pub mod log;
pub mod microtasks;
pub mod outgoing;
pub mod random;
pub mod respond;
pub mod sql;
pub mod timeout;

//! The wire between the worker's Sandbox object and sandboxd, the program in
//! each room's container: the routes, what is sent and what is answered,
//! defined once so that neither side can drift from the other. Both crates
//! build it, the worker for wasm32 and sandboxd natively, so it is plain
//! serde types and nothing else: each side brings its own HTTP and JSON.
//!
//! ```text
//! GET    /health                                   200 "ok"
//! POST   /v1/sandboxes/{name}/exec                 ExecRequest -> ExecResult
//! POST   /v1/sandboxes/{name}/exec/stream          ExecRequest -> NDJSON of Event
//! DELETE /v1/sandboxes/{name}                      {"destroyed": true}
//! GET    /v1/sandboxes/{name}/archive?maxBytes=N   the workspace as a gzipped tar,
//!                                                  with x-duet-entries: N,
//!                                                  x-duet-unpacked-bytes: N and,
//!                                                  if anything was left out,
//!                                                  x-duet-left-out: note
//! PUT    /v1/sandboxes/{name}/archive?timeoutMs=N  gzipped tar -> RestoreResult
//! POST   /v1/sandboxes/{name}/jobs, …                jobs (see [`job`])
//! GET    /v1/sandboxes/{name}/files?path=P, …        files (see [`file`])
//! GET    /v1/sandboxes/{name}/terminal, …            the shared terminal (see [`terminal`])
//! ```
//!
//! An archive's headers say what its restore will hold ([`ENTRIES_HEADER`],
//! [`UNPACKED_BYTES_HEADER`]), and so how long it may take ([`restore_ms`],
//! at most [`RESTORE_MAX_MS`]: sandboxd refuses to pack a workspace whose
//! restore would take longer), and what of the workspace it does not hold
//! ([`LEFT_OUT_HEADER`]).
//!
//! Every error is `{"error": "..."}`. What each route refuses, and why, is
//! sandboxd's to say (its `http` module); the worker's `sandbox::sandboxd`
//! says what it makes of each answer.

mod archive;
mod exec;
pub mod file;
pub mod job;
mod route;
pub mod stream;
pub mod terminal;

pub use archive::{
    restore_ms, RestoreResult, ENTRIES_HEADER, LEFT_OUT_HEADER, MAX_BYTES, RESTORE_BASE_MS,
    RESTORE_BYTES_PER_MS, RESTORE_ENTRY_US, RESTORE_MAX_MS, TIMEOUT_MS, UNPACKED_BYTES_HEADER,
};
pub use exec::{ExecEnd, ExecRequest, ExecResult};
pub use route::Route;
pub use stream::Stream;

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
//! GET    /v1/sandboxes/{name}/archive?maxBytes=N   the workspace as a gzipped tar
//! PUT    /v1/sandboxes/{name}/archive?timeoutMs=N  gzipped tar -> RestoreResult
//! ```
//!
//! Every error is `{"error": "..."}`. What each route refuses, and why, is
//! sandboxd's to say (its `http` module); the worker's `sandbox::sandboxd`
//! says what it makes of each answer.

mod archive;
mod exec;
mod route;
pub mod stream;

pub use archive::{RestoreResult, MAX_BYTES, TIMEOUT_MS};
pub use exec::{ExecEnd, ExecRequest, ExecResult};
pub use route::Route;
pub use stream::Stream;

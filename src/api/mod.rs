//! The public HTTP API as plain data: routes, who may use them, room tokens,
//! limits, wire types, validation and errors. Nothing here touches the Workers runtime, so all of it is
//! tested with native `cargo test`.

pub mod cross_site;
pub mod error;
pub mod invite;
pub mod limits;
pub mod role;
pub mod route;
pub mod validate;
pub mod wire;

pub use error::ApiError;

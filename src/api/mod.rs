//! The public HTTP API as plain data: routes, limits, wire types, validation
//! and errors. Nothing here touches the Workers runtime, so all of it is
//! tested with native `cargo test`.

pub mod auth;
pub mod cross_site;
pub mod error;
pub mod limits;
pub mod live;
pub mod route;
pub mod validate;
pub mod wire;

pub use error::ApiError;

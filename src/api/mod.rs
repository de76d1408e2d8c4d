//! The public HTTP API as plain data: its routes ([`route`]), the roles'
//! names ([`role`]; which route needs which is `access::roles`'), limits,
//! the JSON shapes of its bodies ([`shapes`], [`invite`]), validation,
//! errors and their statuses, and the cross-site rules. Nothing here
//! touches the Workers runtime or any room concept, so all of it is tested
//! with native `cargo test`.

pub mod cross_site;
pub mod error;
pub mod invite;
pub mod limits;
pub mod role;
pub mod route;
pub mod shapes;
pub mod validate;

pub use error::ApiError;

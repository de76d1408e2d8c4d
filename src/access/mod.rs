//! Who may do what in a room, and how they show it: the three roles and what
//! each route needs ([`roles`]), room tokens ([`token`]) signed with the
//! deployment's key ([`signing`]), how a request presents one
//! ([`presented`]), the one reader of a request's token with one cache per
//! isolate ([`request`]), and the room's generation that revoking renews
//! ([`generation`]). The pure rules are tested natively; `request`,
//! `signing` and `generation` are the runtime glue.

pub mod generation;
pub mod presented;
pub mod request;
pub mod roles;
pub mod signing;
pub mod token;

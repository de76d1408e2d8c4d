//! The agent's pure logic: what the model is told, and how its `<run>` tags
//! become commands and, once run, a reply.

pub mod context;
pub mod run_tags;

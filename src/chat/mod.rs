//! The agent's pure logic: what the model is told, how its `<run>` tags
//! become commands and, once run, a reply, and how the reply's time is
//! shared out.

pub mod budget;
pub mod context;
pub mod run_tags;

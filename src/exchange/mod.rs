//! The agent's pure logic: what the model is told, how its `<run>` tags
//! become commands, how an exchange goes on in rounds until the model is
//! done, how the room's reply is written, and how the exchange's time is
//! shared out.

pub mod budget;
pub mod context;
pub mod rounds;
pub mod run;
pub mod run_tags;
pub mod shown;
pub mod tools;

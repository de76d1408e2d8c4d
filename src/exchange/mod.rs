//! One message's exchange with the model. The loop that drives it is
//! [`run`]: it asks the model, puts the commands of each answer to the
//! room's policy, runs them through the Sandbox object, and asks again
//! with their results, until the model is done or a limit is reached. What
//! it uses is pure and tested natively: what the model is told
//! ([`context`]), how an answer's `<run>` tags ([`run_tags`]) or tool calls
//! ([`tools`]) become commands, how the rounds go on and how the room's
//! reply is written ([`rounds`]), what of a streaming answer the room may
//! see ([`shown`]), and how the exchange's time is shared out ([`budget`]).
//! The DuetAgent stores and publishes what an exchange came to
//! (`agent::exchange`).

pub mod budget;
pub mod context;
pub mod rounds;
pub mod run;
pub mod run_tags;
pub mod shown;
pub mod tools;

//! The Workers AI binding. Input goes as a typed struct: a `serde_json::Value`
//! map would reach JavaScript as a `Map`, in which Workers AI finds no
//! `messages` field.

use serde::{Deserialize, Serialize};
use worker::Ai;

use super::{Failure, MAX_TOKENS};
use crate::chat::context::ChatMessage;

#[derive(Serialize)]
pub struct Input<'a> {
    pub messages: &'a [ChatMessage<'a>],
    pub max_tokens: u32,
}

#[derive(Deserialize)]
struct Output {
    response: Option<String>,
}

/// What local development's stand-in binding throws.
const LOCAL_ONLY: &str = "needs to be run remotely";

pub(super) async fn ask(
    ai: &Ai,
    model: &str,
    messages: &[ChatMessage<'_>],
) -> Result<String, Failure> {
    let input = Input {
        messages,
        max_tokens: MAX_TOKENS,
    };
    match ai.run::<_, Output>(model, input).await {
        Ok(Output {
            response: Some(text),
        }) => Ok(text),
        Ok(Output { response: None }) => Err(Failure::Error("Workers AI returned no text".into())),
        Err(e) if e.to_string().contains(LOCAL_ONLY) => Err(Failure::Unusable),
        Err(e) => Err(Failure::Error(format!("Workers AI: {e}"))),
    }
}

//! Asks a model for the agent's answer. Two backends speak the same context:
//!
//! - the Workers AI binding `AI`, used whenever it works;
//! - an OpenAI-compatible `/v1/chat/completions` server at `AI_BASE_URL`
//!   (Ollama, llama.cpp's server, vLLM, OpenAI), used when the binding is
//!   missing or is the local stand-in that `wrangler dev --local` gives, which
//!   only throws "needs to be run remotely".
//!
//! Either way the call is bounded by `AI_TIMEOUT_MS` (at most 15 s), the
//! model is asked as its family expects ([`input`]), and only the answer's
//! text comes back, without the model's thinking ([`completion`]).

pub mod completion;
pub mod input;
mod openai;
pub mod workers_ai;

use worker::Env;

use crate::api::limits::{AI_TIMEOUT_MS, MAX_MODEL_ANSWER_CHARS};
use crate::api::ApiError;
use crate::chat::context::ChatMessage;
use crate::runtime::ai_options::RunOptions;
use crate::runtime::{bindings, config, timeout};
use crate::text::{first_chars, without_controls};
use completion::Completion;

/// Workers AI's GLM-4.7-Flash: the fast, low-cost coding model Cloudflare
/// recommends in place of the retired Llama 3 8B (see the README).
pub const DEFAULT_MODEL: &str = "@cf/zai-org/glm-4.7-flash";
/// Where to choose another model.
pub const CATALOG: &str = "https://developers.cloudflare.com/workers-ai/models/";

/// Why the Workers AI binding could not answer.
enum Failure {
    /// The binding exists but cannot run here (local development).
    Unusable,
    /// The service is out of capacity for the model (3040): worth asking
    /// again soon.
    Busy(String),
    Error(String),
}

/// The model's answer to `context`, within `AI_TIMEOUT_MS` and at most
/// `max_ms`. The calls of one `session` (a room) are kept together, so
/// that the prefix they share stays in the model's prompt cache.
pub async fn answer(
    env: &Env,
    session: &str,
    context: &[ChatMessage<'_>],
    max_ms: u64,
) -> Result<String, ApiError> {
    let limit = time_limit(env).min(max_ms);
    let model = config::get(env, "AI_MODEL").unwrap_or_else(|| DEFAULT_MODEL.to_owned());
    let completion = timeout::within(limit, ask(env, &model, session, context))
        .await
        .ok_or(ApiError::AiTimeout(limit))??;
    // Chat text: no terminal control sequences reach other people's screens.
    let text = completion
        .text()
        .map(|text| without_controls(&text).trim().to_owned())
        .filter(|text| !text.is_empty())
        .ok_or_else(|| ApiError::AiFailed(format!("the model {model} returned no text")))?;
    Ok(first_chars(&text, MAX_MODEL_ANSWER_CHARS).to_owned())
}

/// The configured `AI_TIMEOUT_MS`, at most [`AI_TIMEOUT_MS`].
pub fn time_limit(env: &Env) -> u64 {
    config::number(env, "AI_TIMEOUT_MS", AI_TIMEOUT_MS, AI_TIMEOUT_MS)
}

async fn ask(
    env: &Env,
    model: &str,
    session: &str,
    context: &[ChatMessage<'_>],
) -> Result<Completion, ApiError> {
    let binding = bindings::ai(env, "AI").ok();
    if let Some(ai) = &binding {
        let gateway = config::get(env, "AI_GATEWAY_ID");
        let options = RunOptions {
            session,
            gateway: gateway.as_deref(),
        };
        match workers_ai::ask(ai, model, context, &options).await {
            Ok(completion) => return Ok(completion),
            Err(Failure::Busy(why)) => return Err(ApiError::AiBusy(why)),
            Err(Failure::Error(why)) => return Err(ApiError::AiFailed(why)),
            Err(Failure::Unusable) => {}
        }
    }
    let Some(base_url) = config::get(env, "AI_BASE_URL") else {
        let why = if binding.is_some() {
            "the Workers AI binding only runs on Cloudflare (log in and use `wrangler dev --remote`), or set AI_BASE_URL to an OpenAI-compatible server"
        } else {
            "bind Workers AI as `AI`, or set AI_BASE_URL to an OpenAI-compatible server"
        };
        return Err(ApiError::AiUnavailable(why.to_owned()));
    };
    let key = config::get(env, "AI_API_KEY");
    openai::ask(&base_url, key.as_deref(), model, context)
        .await
        .map_err(ApiError::AiFailed)
}

//! Asks a model for the agent's answer. Two backends speak the same context:
//!
//! - the Workers AI binding `AI`, used whenever it works;
//! - an OpenAI-compatible `/v1/chat/completions` server at `AI_BASE_URL`
//!   (Ollama, llama.cpp's server, vLLM, OpenAI), used when the binding is
//!   missing or is the local stand-in that `wrangler dev --local` gives, which
//!   only throws "needs to be run remotely".
//!
//! Either way the answer streams ([`sse`]), the whole call, stream
//! included, is bounded by `AI_TIMEOUT_MS` (at most 15 s), the model is
//! asked as its family expects ([`input`]), and only the answer's text and
//! tool calls come back, without the model's thinking ([`thinking`]).

pub mod input;
pub mod messages;
mod openai;
pub mod sse;
pub mod thinking;
pub mod workers_ai;

use futures_util::StreamExt;
use worker::{ByteStream, Env};

use crate::ai::messages::ChatMessage;
use crate::ai::messages::ToolCall;
use crate::api::limits::{AI_TIMEOUT_MS, MAX_MODEL_ANSWER_CHARS};
use crate::api::ApiError;
use crate::runtime::ai_options::RunOptions;
use crate::runtime::timeout::Deadline;
use crate::runtime::{bindings, config};
use crate::text::{first_chars, without_controls};
use sse::{Streamed, MAX_STREAM_BYTES};

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

/// The model the room asks, and how.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Model {
    pub name: String,
    /// Offered the agent's tool (`AI_TOOLS`, by default for the families
    /// that call functions in the OpenAI shape).
    pub tools: bool,
    /// Its text starts as thoughts with no opening tag.
    pub thinks_inline: bool,
}

impl Model {
    /// `AI_MODEL` (else [`DEFAULT_MODEL`]), as `AI_TOOLS` says.
    pub fn configured(env: &Env) -> Result<Self, ApiError> {
        let name = config::get(env, "AI_MODEL").unwrap_or_else(|| DEFAULT_MODEL.to_owned());
        let tools = match config::get(env, "AI_TOOLS").as_deref().map(str::trim) {
            None | Some("auto") => input::calls_tools(&name),
            Some("on") => true,
            Some("off") => false,
            Some(other) => {
                return Err(ApiError::NotConfigured(format!(
                    "AI_TOOLS is {other:?}; set it to auto, on or off"
                )))
            }
        };
        Ok(Self {
            thinks_inline: input::thinks_inline(&name),
            name,
            tools,
        })
    }
}

/// A model's answer: its text (no thinking, no control sequences, at most
/// [`MAX_MODEL_ANSWER_CHARS`]), its tool calls, and why it was cut short,
/// if it was.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    pub text: String,
    pub calls: Vec<ToolCall>,
    pub cut: Option<String>,
}

/// An answer on its way: [`Arriving::next`] gives its text as it comes,
/// [`Arriving::finish`] the answer once it is complete, cut, or out of time.
pub struct Arriving {
    stream: Option<ByteStream>,
    streamed: Streamed,
    model: String,
    limit: u64,
    deadline: Deadline,
    cut: Option<String>,
    stalled: bool,
}

/// Asks `model` for its answer to `context`, within `AI_TIMEOUT_MS` and at
/// most `max_ms`, stream and all. The calls of one `session` (a room) are
/// kept together, so that the prefix they share stays in the model's
/// prompt cache.
pub async fn ask(
    env: &Env,
    model: &Model,
    session: &str,
    context: &[ChatMessage<'_>],
    max_ms: u64,
) -> Result<Arriving, ApiError> {
    let limit = time_limit(env).min(max_ms);
    let mut deadline = Deadline::in_ms(limit);
    let stream = deadline
        .within(open(env, model, session, context))
        .await
        .ok_or(ApiError::AiTimeout(limit))??;
    Ok(Arriving {
        stream: Some(stream),
        streamed: Streamed::default(),
        model: model.name.clone(),
        limit,
        deadline,
        cut: None,
        stalled: false,
    })
}

impl Arriving {
    /// The text the next chunk adds (perhaps none), or `None` once nothing
    /// more will come.
    pub async fn next(&mut self) -> Option<String> {
        let stream = self.stream.as_mut()?;
        let why = match self.deadline.within(stream.next()).await {
            Some(Some(Ok(chunk))) => {
                let text = self.streamed.push(&chunk);
                if self.streamed.complete() {
                    self.stream = None;
                } else if self.streamed.over_bound() {
                    self.stream = None;
                    self.cut = Some(format!("it was over {MAX_STREAM_BYTES} bytes"));
                }
                return Some(text);
            }
            Some(Some(Err(e))) => format!("its stream broke off: {e}"),
            Some(None) => "its stream ended before the answer did".to_owned(),
            None => {
                self.stalled = true;
                format!("nothing more came within {} ms", self.limit)
            }
        };
        self.stream = None;
        self.cut = Some(why);
        None
    }

    /// The answer as it came. Nothing at all is a failure: a timeout when
    /// the model stalled, else a model that said nothing.
    pub fn finish(self) -> Result<Answer, ApiError> {
        let (raw, calls) = self.streamed.into_answer();
        // Chat text: no terminal control sequences reach other people's screens.
        let text = thinking::trimmed_without_thinking(&raw)
            .map(|text| {
                first_chars(without_controls(&text).trim(), MAX_MODEL_ANSWER_CHARS).to_owned()
            })
            .unwrap_or_default();
        if text.is_empty() && calls.is_empty() {
            let model = &self.model;
            return Err(match self.cut {
                _ if self.stalled => ApiError::AiTimeout(self.limit),
                Some(why) => ApiError::AiFailed(format!(
                    "the answer of the model {model} broke off before any text: {why}"
                )),
                None => ApiError::AiFailed(format!("the model {model} returned no text")),
            });
        }
        Ok(Answer {
            text,
            calls,
            cut: self.cut,
        })
    }
}

/// The configured `AI_TIMEOUT_MS`, at most [`AI_TIMEOUT_MS`].
pub fn time_limit(env: &Env) -> u64 {
    config::number(env, "AI_TIMEOUT_MS", AI_TIMEOUT_MS, AI_TIMEOUT_MS)
}

async fn open(
    env: &Env,
    model: &Model,
    session: &str,
    context: &[ChatMessage<'_>],
) -> Result<ByteStream, ApiError> {
    let input = input::for_model(&model.name, context, model.tools);
    let binding = bindings::ai(env, "AI").ok();
    if let Some(ai) = &binding {
        let gateway = config::get(env, "AI_GATEWAY_ID");
        let options = RunOptions {
            session,
            gateway: gateway.as_deref(),
        };
        match workers_ai::ask(ai, &model.name, &input, &options).await {
            Ok(opened) => return Ok(opened),
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
    openai::ask(&base_url, key.as_deref(), &model.name, input)
        .await
        .map_err(ApiError::AiFailed)
}

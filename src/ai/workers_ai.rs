//! The Workers AI binding. The input crosses into JavaScript as JSON text
//! (`JSON.parse`), written by serde_json, which the worker links anyway:
//! serde_wasm_bindgen would cost a few KiB of the upload for the same
//! object.
//!
//! Asked to stream, the binding answers the service's event stream as it
//! comes (a `ReadableStream`).
//!
//! The binding throws the service's errors as `<name>: <code>: <description>`
//! (e.g. `AiError: 5007: No such model …`); the code says what went wrong,
//! whatever the name.

use worker::js_sys::JSON;
use worker::wasm_bindgen::{JsCast, JsValue};
use worker::wasm_bindgen_futures::JsFuture;
use worker::web_sys::ReadableStream;
use worker::worker_sys::Ai;
use worker::ByteStream;

use super::input::Input;
use super::{Failure, CATALOG};
use crate::runtime::ai_options::{self, RunOptions};

/// What local development's stand-in binding throws.
const LOCAL_ONLY: &str = "needs to be run remotely";

pub(super) async fn ask(
    ai: &Ai,
    model: &str,
    input: &Input<'_>,
    options: &RunOptions<'_>,
) -> Result<ByteStream, Failure> {
    run(ai, model, input, options)
        .await
        .map_err(|e| failure(model, &e))
}

/// The binding's answer to `input`, or what went wrong in words.
async fn run(
    ai: &Ai,
    model: &str,
    input: &Input<'_>,
    options: &RunOptions<'_>,
) -> Result<ByteStream, String> {
    let input = to_js(input)?;
    let call = ai_options::run(ai, model, input, options).map_err(thrown)?;
    let answer = JsFuture::from(call).await.map_err(thrown)?;
    let stream = answer
        .dyn_into::<ReadableStream>()
        .map_err(|_| "the binding answered without streaming".to_owned())?;
    Ok(ByteStream::from(stream))
}

fn thrown(e: JsValue) -> String {
    worker::Error::from(e).to_string()
}

/// The input as the binding takes it: a plain JavaScript object.
pub fn to_js(input: &Input<'_>) -> Result<JsValue, String> {
    let input = serde_json::to_string(input).expect("an input serializes");
    JSON::parse(&input).map_err(thrown)
}

/// What a thrown error means, in words that say what to do about it.
fn failure(model: &str, error: &str) -> Failure {
    if error.contains(LOCAL_ONLY) {
        return Failure::Unusable;
    }
    let why = match error_code(error) {
        Some(5028) => format!(
            "the model {model} (AI_MODEL) is retired on Workers AI ({error}); set AI_MODEL to a current model from {CATALOG}"
        ),
        Some(5007 | 3042) => format!(
            "the model {model} (AI_MODEL) is unknown to Workers AI ({error}); set AI_MODEL to a model from {CATALOG}"
        ),
        Some(5035) => format!(
            "the model {model} (AI_MODEL) needs the Workers Paid plan ({error}); upgrade, or set AI_MODEL to a model from {CATALOG}"
        ),
        Some(3040) => {
            return Failure::Busy(format!(
                "Workers AI has no capacity for {model} right now ({error}); try again in a moment"
            ))
        }
        _ => format!("Workers AI: {error}"),
    };
    Failure::Error(why)
}

/// The service's four-digit error code: the first `NNNN:` in the message.
fn error_code(error: &str) -> Option<u16> {
    let mut parts = error.split(':').map(str::trim).peekable();
    while let Some(part) = parts.next() {
        let is_code = part.len() == 4 && part.bytes().all(|b| b.is_ascii_digit());
        if is_code && parts.peek().is_some() {
            return part.parse().ok();
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn why(error: &str) -> String {
        match failure("@cf/x/model", error) {
            Failure::Error(why) => why,
            Failure::Busy(_) | Failure::Unusable => panic!("not an error"),
        }
    }

    #[test]
    fn codes_are_found_whatever_the_error_name() {
        assert_eq!(error_code("AiError: 5007: No such model"), Some(5007));
        assert_eq!(error_code("InferenceUpstreamError: 3040: busy"), Some(3040));
        assert_eq!(error_code("Error: AiError: 5028: deprecated"), Some(5028));
        assert_eq!(error_code("12345: not a code"), None);
        assert_eq!(error_code("no code at all"), None);
        assert_eq!(error_code("502"), None);
    }

    #[test]
    fn retired_and_unknown_models_say_what_to_do() {
        let retired = why("AiError: 5028: This model was deprecated on 2026-05-30. Please use an alternative model.");
        assert!(
            retired.contains("@cf/x/model (AI_MODEL) is retired"),
            "{retired}"
        );
        assert!(retired.contains(CATALOG));
        let unknown = why("AiError: 5007: No such model @cf/x/model or task");
        assert!(unknown.contains("is unknown to Workers AI"), "{unknown}");
        assert!(unknown.contains(CATALOG));
        assert!(
            why("AiError: 5035: This model requires a Workers Paid plan.").contains("Workers Paid")
        );
    }

    #[test]
    fn no_capacity_is_busy_and_says_so() {
        let Failure::Busy(why) = failure(
            "@cf/x/model",
            "AiError: 3040: Capacity temporarily exceeded, please try again.",
        ) else {
            panic!("not busy");
        };
        assert_eq!(
            why,
            "Workers AI has no capacity for @cf/x/model right now (AiError: 3040: Capacity temporarily exceeded, please try again.); try again in a moment"
        );
    }

    #[test]
    fn the_local_binding_is_unusable_not_failed() {
        assert!(matches!(
            failure("m", "Error: Binding AI needs to be run remotely"),
            Failure::Unusable
        ));
    }
}

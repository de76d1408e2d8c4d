//! An OpenAI-compatible chat completions server, for running without Workers
//! AI. `AI_BASE_URL` is the server's root; a trailing `/v1` is accepted too.
//!
//! The answer streams (`text/event-stream`), as OpenAI, Ollama, vLLM and
//! llama.cpp's server all do when asked; a server that answers otherwise is
//! refused, saying so.
//!
//! Errors name the server by its origin only: a URL may carry credentials
//! (`http://user:password@host`), and an upstream's error body may echo the
//! user's message, so neither goes into an answer or a log.

use serde::Serialize;
use wasm_bindgen::JsValue;
use worker::{ByteStream, Fetch, Headers, Method, Request};

use super::input::Input;
use crate::runtime::outgoing::{self, Parts};

#[derive(Serialize)]
struct Body<'a> {
    model: &'a str,
    #[serde(flatten)]
    input: Input<'a>,
}

/// The completions URL for a configured base.
pub fn endpoint(base_url: &str) -> String {
    let base = base_url.trim().trim_end_matches('/');
    let base = base.strip_suffix("/v1").unwrap_or(base);
    format!("{base}/v1/chat/completions")
}

/// The base URL as errors may show it: scheme, host and port, with no
/// credentials, path or query.
pub fn origin(base_url: &str) -> String {
    let url = base_url.trim();
    let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host = authority
        .rsplit_once('@')
        .map_or(authority, |(_, host)| host);
    match scheme {
        "" => host.to_owned(),
        _ => format!("{scheme}://{host}"),
    }
}

pub(super) async fn ask(
    base_url: &str,
    key: Option<&str>,
    model: &str,
    input: Input<'_>,
) -> Result<ByteStream, String> {
    let server = origin(base_url);
    let body = serde_json::to_string(&Body { model, input }).map_err(|e| e.to_string())?;
    let request = build(&endpoint(base_url), key, body)
        .map_err(|_| format!("AI_BASE_URL is not a usable URL ({server})"))?;
    let mut response = Fetch::Request(request)
        .send()
        .await
        .map_err(|_| format!("cannot reach {server}"))?;
    match response.status_code() {
        200..=299 => {}
        404 => return Err(format!(
            "{server} answered 404: it has no model {model} (AI_MODEL), or AI_BASE_URL is not an OpenAI-compatible server"
        )),
        status => return Err(format!("{server} answered {status}")),
    }
    let kind = response.headers().get("content-type").ok().flatten();
    match kind {
        Some(kind) if kind.starts_with("text/event-stream") => response
            .stream()
            .map_err(|_| format!("{server} broke off its answer")),
        kind => Err(format!(
            "{server} answered without streaming ({}); use a server that streams chat completions",
            kind.as_deref().unwrap_or("no content-type")
        )),
    }
}

fn build(url: &str, key: Option<&str>, body: String) -> worker::Result<Request> {
    let headers = Headers::new();
    headers.set("content-type", "application/json")?;
    if let Some(key) = key {
        headers.set("authorization", &format!("Bearer {key}"))?;
    }
    let body = JsValue::from_str(&body);
    let parts = Parts {
        headers: Some(&headers),
        body: Some(&body),
        ..Parts::default()
    };
    outgoing::request(Method::Post, url, parts)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ai::input;
    use crate::ai::messages::ChatMessage;

    #[test]
    fn endpoint_accepts_root_or_v1() {
        for base in [
            "http://127.0.0.1:11434",
            "http://127.0.0.1:11434/",
            "http://127.0.0.1:11434/v1",
            "http://127.0.0.1:11434/v1/",
        ] {
            assert_eq!(
                endpoint(base),
                "http://127.0.0.1:11434/v1/chat/completions",
                "{base}"
            );
        }
    }

    #[test]
    fn origins_carry_no_credentials_or_paths() {
        assert_eq!(
            origin("http://user:pw@10.0.0.1:8080/v1?k=s#f"),
            "http://10.0.0.1:8080"
        );
        assert_eq!(
            origin("https://api.example.com/v1/"),
            "https://api.example.com"
        );
        assert_eq!(origin(" http://a:b:c@host "), "http://host");
        assert_eq!(origin("http://[::1]:11434"), "http://[::1]:11434");
        assert_eq!(origin("host:1234/path"), "host:1234");
    }

    #[test]
    fn the_body_is_the_model_input_plus_model() {
        let messages = [ChatMessage::text("user", "hi")];
        let body = serde_json::to_value(Body {
            model: "qwen3:8b",
            input: input::for_model("qwen3:8b", &messages, false),
        })
        .unwrap();
        assert_eq!(
            body,
            serde_json::json!({
                "model": "qwen3:8b",
                "messages": [{"role": "user", "content": "hi"}],
                "max_completion_tokens": input::MAX_OUTPUT_TOKENS,
                "chat_template_kwargs": {"enable_thinking": false},
                "stream": true,
            })
        );
    }
}

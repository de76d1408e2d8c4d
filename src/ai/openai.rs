//! An OpenAI-compatible chat completions server, for running without Workers
//! AI. `AI_BASE_URL` is the server's root; a trailing `/v1` is accepted too.

use serde::{Deserialize, Serialize};
use wasm_bindgen::JsValue;
use worker::{Fetch, Headers, Method, Request, RequestInit};

use super::MAX_TOKENS;
use crate::chat::context::ChatMessage;

#[derive(Serialize)]
struct Completion<'a> {
    model: &'a str,
    messages: &'a [ChatMessage<'a>],
    max_tokens: u32,
    stream: bool,
}

#[derive(Deserialize)]
struct Completed {
    choices: Vec<Choice>,
}

#[derive(Deserialize)]
struct Choice {
    message: Reply,
}

#[derive(Deserialize)]
struct Reply {
    content: Option<String>,
}

/// The completions URL for a configured base.
pub fn endpoint(base_url: &str) -> String {
    let base = base_url.trim().trim_end_matches('/');
    let base = base.strip_suffix("/v1").unwrap_or(base);
    format!("{base}/v1/chat/completions")
}

pub(super) async fn ask(
    base_url: &str,
    key: Option<&str>,
    model: &str,
    messages: &[ChatMessage<'_>],
) -> Result<String, String> {
    let body = serde_json::to_string(&Completion {
        model,
        messages,
        max_tokens: MAX_TOKENS,
        stream: false,
    })
    .map_err(|e| e.to_string())?;
    let request = build(&endpoint(base_url), key, body).map_err(|e| e.to_string())?;
    let mut response = Fetch::Request(request)
        .send()
        .await
        .map_err(|e| format!("cannot reach {base_url}: {e}"))?;
    let status = response.status_code();
    let text = response.text().await.map_err(|e| e.to_string())?;
    if !(200..300).contains(&status) {
        let snippet: String = text.chars().take(200).collect();
        return Err(format!("{base_url} answered {status}: {snippet}"));
    }
    let completed: Completed = serde_json::from_str(&text)
        .map_err(|e| format!("{base_url} sent an unexpected body: {e}"))?;
    completed
        .choices
        .into_iter()
        .next()
        .and_then(|choice| choice.message.content)
        .ok_or_else(|| format!("{base_url} returned no text"))
}

fn build(url: &str, key: Option<&str>, body: String) -> worker::Result<Request> {
    let headers = Headers::new();
    headers.set("content-type", "application/json")?;
    if let Some(key) = key {
        headers.set("authorization", &format!("Bearer {key}"))?;
    }
    let mut init = RequestInit::new();
    init.with_method(Method::Post)
        .with_headers(headers)
        .with_body(Some(JsValue::from_str(&body)));
    Request::new_with_init(url, &init)
}

#[cfg(test)]
mod tests {
    use super::*;

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
}

//! The file tools carried out against sandboxd's files route, without the
//! shell: what each asks and answers is `files::tools`'. A read or a
//! listing is one `GET`; a write one `PUT`; an edit reads the file whole
//! and writes it back whole (a change someone else makes between the two is
//! overwritten). A preview reads what a write or an edit would replace and
//! answers the diff, writing nothing. Every refusal (a path, a file too
//! large, a sandbox that cannot be reached) is the call's, as text its
//! caller's model reads.

use duet_wire::file::{path_query, FileChanged};
use serde_json::Value;
use worker::{Method, Response};

use super::sandboxd::Sandboxd;
use crate::files::changed_of;
use crate::files::tools::{diff, listing, numbered, replace_once, text, FileTool};
use crate::runtime::{body, internal};

/// What a file tool's call came to: what its caller hears, and the change
/// it made, if any.
pub struct Done {
    pub text: String,
    pub changed: Option<FileChanged>,
}

pub async fn carry_out(
    sandboxd: &Sandboxd<'_>,
    name: &str,
    tool: &FileTool,
    path: &str,
    preview: bool,
) -> Result<Done, String> {
    let read = || get(sandboxd, name, path);
    let text = match tool {
        FileTool::Read { offset, limit } => {
            let (bytes, list) = read().await?;
            match list {
                Some(_) => return Err(format!("{path} is a directory; list it with list_files")),
                None => numbered(path, &bytes, *offset, *limit),
            }
        }
        FileTool::List => match read().await? {
            (_, Some(list)) => listing(&list),
            (bytes, None) => format!(
                "{path} is a file of {} bytes; read it with read_file",
                bytes.len()
            ),
        },
        FileTool::Write { content } if preview => {
            let old = match read().await {
                Ok((bytes, None)) => text_of(path, bytes)?,
                Ok((_, Some(_))) => return Err(format!("{path} is a directory")),
                // A new file.
                Err(_) => String::new(),
            };
            diff(path, &old, content)
        }
        FileTool::Write { content } => {
            let changed = put(sandboxd, name, path, content.clone()).await?;
            let text = format!("wrote {} bytes to {}", content.len(), changed.path);
            return Ok(Done {
                text,
                changed: Some(changed),
            });
        }
        FileTool::Edit { old_text, new_text } => {
            let old = match read().await? {
                (bytes, None) => text_of(path, bytes)?,
                (_, Some(_)) => return Err(format!("{path} is a directory")),
            };
            let new = replace_once(path, &old, old_text, new_text)?;
            if preview {
                diff(path, &old, &new)
            } else {
                let changed = put(sandboxd, name, path, new).await?;
                let text = format!("replaced the one match of `old_text` in {}", changed.path);
                return Ok(Done {
                    text,
                    changed: Some(changed),
                });
            }
        }
    };
    Ok(Done {
        text,
        changed: None,
    })
}

/// The bytes of the file at `path`, or the listing of the directory.
async fn get(
    sandboxd: &Sandboxd<'_>,
    name: &str,
    path: &str,
) -> Result<(Vec<u8>, Option<Value>), String> {
    let response = answered(
        sandboxd
            .files(Method::Get, name, &path_query(path), None, None)
            .await,
    )
    .await?;
    let listed = response
        .headers()
        .get("content-type")
        .ok()
        .flatten()
        .is_some_and(|kind| kind.starts_with("application/json"));
    let bytes = body::all_of(response)
        .await
        .map_err(|e| worker::Error::from(e).to_string())?;
    match listed {
        true => serde_json::from_slice(&bytes)
            .map(|list| (vec![], Some(list)))
            .map_err(|e| format!("unexpected listing from sandboxd: {e}")),
        false => Ok((bytes, None)),
    }
}

async fn put(
    sandboxd: &Sandboxd<'_>,
    name: &str,
    path: &str,
    content: String,
) -> Result<FileChanged, String> {
    let body = Some(worker::wasm_bindgen::JsValue::from_str(&content));
    let sent = sandboxd
        .files(Method::Put, name, &path_query(path), None, body)
        .await;
    let mut response = answered(sent).await?;
    let answer: Option<Value> = response.json().await.ok();
    answer
        .as_ref()
        .and_then(changed_of)
        .ok_or_else(|| "unexpected answer from sandboxd to a write".to_owned())
}

/// A response of sandboxd's that is a success; a refusal as its words.
async fn answered(sent: Result<Response, crate::api::ApiError>) -> Result<Response, String> {
    let response = sent.map_err(|e| e.to_string())?;
    match response.status_code() {
        200 | 206 => Ok(response),
        _ => Err(internal::error_of(response).await),
    }
}

/// A file's bytes as text, for an edit or a diff; a binary file has none.
fn text_of(path: &str, bytes: Vec<u8>) -> Result<String, String> {
    text(&bytes)
        .map(str::to_owned)
        .ok_or_else(|| format!("{path} is a binary file; it cannot be edited as text"))
}

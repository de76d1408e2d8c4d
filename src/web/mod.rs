//! The web page: `/` to create or enter a room, `/rooms/{roomId}` to watch
//! and use it live. Plain HTML, CSS and a little JavaScript (no framework),
//! with xterm.js for the room's terminal; `scripts/page.mjs` writes them
//! into `build/page/` with fingerprinted asset names, and wrangler.toml hands
//! that folder to the platform's asset store: their bytes are not in the
//! Worker's upload, so the page can grow without slowing the Worker's start.
//! The Worker still routes every request and sets every header; it reads a
//! file through the `ASSETS` binding and passes its body on.

use worker::wasm_bindgen::JsCast;
use worker::wasm_bindgen_futures::JsFuture;
use worker::{web_sys, Env};

use crate::api::route::Page;
use crate::api::ApiError;
use crate::runtime::bindings;

const HTML: &str = "text/html; charset=utf-8";

/// The response for a part of the page.
pub async fn serve(page: &Page, env: &Env) -> Result<web_sys::Response, ApiError> {
    let (file, content_type, cache_control) = match page {
        Page::Home => ("home.html".into(), HTML, "no-cache"),
        // The room id comes from the URL, in the page's script.
        Page::Room(_) => ("room.html".into(), HTML, "no-cache"),
        // A fingerprinted name: what it names never changes.
        Page::Asset(name) => (
            format!("assets/{name}"),
            asset_type(name),
            "public, max-age=31536000, immutable",
        ),
    };
    // The asset store answers by path; the host is not looked at.
    let url = format!("https://assets.invalid/{file}");
    let found = bindings::fetcher(env, "ASSETS")?.fetch_with_str(&url)?;
    let found: web_sys::Response = JsFuture::from(found).await?.unchecked_into();
    match found.status() {
        200 => {}
        // An asset name the build did not write, or an older one.
        404 if matches!(page, Page::Asset(_)) => return Err(ApiError::NotFound),
        status => {
            return Err(ApiError::Internal(format!(
                "the page's {file} is missing from the assets ({status})"
            )))
        }
    }
    let headers = web_sys::Headers::new()?;
    headers.set("content-type", content_type)?;
    headers.set("cache-control", cache_control)?;
    headers.set("x-content-type-options", "nosniff")?;
    // A room's URL names the room: no link or request from the page passes
    // it on.
    headers.set("referrer-policy", "no-referrer")?;
    // The page loads nothing from elsewhere and may be framed by nobody.
    // Styles may be inline: xterm.js's renderer writes its cell sizes and
    // colours into <style> elements and style attributes as it draws, with
    // no nonce to give it. Scripts stay the page's own files.
    headers.set(
        "content-security-policy",
        "default-src 'self'; style-src 'self' 'unsafe-inline'; connect-src 'self'; frame-ancestors 'none'",
    )?;
    let init = web_sys::ResponseInit::new();
    init.set_headers(&headers);
    Ok(web_sys::Response::new_with_opt_readable_stream_and_init(
        found.body().as_ref(),
        &init,
    )?)
}

/// The content type of an asset, by its extension: the build writes only
/// style sheets and scripts.
fn asset_type(name: &str) -> &'static str {
    if name.ends_with(".css") {
        "text/css; charset=utf-8"
    } else if name.ends_with(".js") {
        "text/javascript; charset=utf-8"
    } else {
        "application/octet-stream"
    }
}

//! The key room tokens are signed with, and HMAC-SHA256 under it, by the
//! runtime's WebCrypto (`crypto.subtle`): no hash code in the upload.
//!
//! The key is the `DUET_TOKEN_KEY` secret when it is set; otherwise it is
//! derived from the service token, as HMAC-SHA256 of `duet room tokens v1`
//! under `DUET_API_TOKEN`, so a deployment needs no second secret (and a new
//! service token ends every room token; a key of its own keeps them apart).
//! It is imported once per isolate: settings do not change while one lives.

use std::cell::RefCell;

use worker::js_sys::{Array, ArrayBuffer, Object, Promise, Reflect, Uint8Array};
use worker::wasm_bindgen::prelude::*;
use worker::wasm_bindgen::JsCast;
use worker::wasm_bindgen_futures::JsFuture;
use worker::Env;

use crate::api::ApiError;
use crate::runtime::config;

/// What the derived key is the MAC of.
const DERIVATION_LABEL: &[u8] = b"duet room tokens v1";

#[wasm_bindgen]
extern "C" {
    type Subtle;

    #[wasm_bindgen(thread_local_v2, js_namespace = crypto, js_name = subtle)]
    static SUBTLE: Subtle;

    #[wasm_bindgen(method, catch, js_name = importKey)]
    fn import_key(
        this: &Subtle,
        format: &str,
        key: &[u8],
        algorithm: &Object,
        extractable: bool,
        usages: &Array,
    ) -> Result<Promise, JsValue>;

    #[wasm_bindgen(method, catch)]
    fn sign(this: &Subtle, algorithm: &str, key: &JsValue, data: &[u8])
        -> Result<Promise, JsValue>;
}

thread_local! {
    /// The imported key, once imported.
    static KEY: RefCell<Option<JsValue>> = const { RefCell::new(None) };
}

/// HMAC-SHA256 of `data` under the worker's token key.
pub async fn mac(env: &Env, data: &[u8]) -> Result<Vec<u8>, ApiError> {
    let key = match KEY.with(|key| key.borrow().clone()) {
        Some(key) => key,
        None => {
            let key = token_key(env).await?;
            KEY.with(|cached| *cached.borrow_mut() = Some(key.clone()));
            key
        }
    };
    Ok(hmac(&key, data).await?)
}

/// The key: `DUET_TOKEN_KEY`, or derived from `DUET_API_TOKEN`.
async fn token_key(env: &Env) -> Result<JsValue, ApiError> {
    if let Some(secret) = config::get(env, "DUET_TOKEN_KEY") {
        return Ok(import(secret.as_bytes()).await?);
    }
    let service = config::get(env, "DUET_API_TOKEN").ok_or_else(|| {
        ApiError::AccessNotConfigured("room tokens need DUET_API_TOKEN or DUET_TOKEN_KEY".into())
    })?;
    let derived = hmac(&import(service.as_bytes()).await?, DERIVATION_LABEL).await?;
    Ok(import(&derived).await?)
}

async fn import(raw: &[u8]) -> Result<JsValue, JsValue> {
    let algorithm = Object::new();
    Reflect::set(&algorithm, &"name".into(), &"HMAC".into())?;
    Reflect::set(&algorithm, &"hash".into(), &"SHA-256".into())?;
    let usages = Array::of1(&"sign".into());
    let promise =
        SUBTLE.with(|subtle| subtle.import_key("raw", raw, &algorithm, false, &usages))?;
    JsFuture::from(promise).await
}

async fn hmac(key: &JsValue, data: &[u8]) -> Result<Vec<u8>, JsValue> {
    let promise = SUBTLE.with(|subtle| subtle.sign("HMAC", key, data))?;
    let signature: ArrayBuffer = JsFuture::from(promise).await?.unchecked_into();
    Ok(Uint8Array::new(&signature).to_vec())
}

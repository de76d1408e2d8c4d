//! The Worker's bindings, looked up by name. `Env`'s own getters also check
//! a binding's class by its constructor's name, three more calls into
//! JavaScript on every request; a binding's kind is fixed by `wrangler.toml`,
//! so only its presence is checked here. Workers AI comes as the runtime's
//! own object: workers-rs's `Ai::run` converts input and answer with
//! serde_wasm_bindgen, which `ai::workers_ai` does without.

use worker::js_sys::Reflect;
use worker::wasm_bindgen::{JsCast, JsValue};
use worker::worker_sys::{Ai, Fetcher};
use worker::{Env, Error, ObjectNamespace};

fn binding<T: JsCast>(env: &Env, name: &str) -> worker::Result<T> {
    let value = Reflect::get(env, &JsValue::from_str(name))?;
    if value.is_undefined() {
        return Err(Error::RustError(format!("the binding `{name}` is missing")));
    }
    Ok(value.unchecked_into())
}

/// A Durable Object namespace.
pub fn durable_objects(env: &Env, name: &str) -> worker::Result<ObjectNamespace> {
    binding(env, name)
}

/// Workers AI.
pub fn ai(env: &Env, name: &str) -> worker::Result<Ai> {
    binding(env, name)
}

/// A service (here: the asset store).
pub fn fetcher(env: &Env, name: &str) -> worker::Result<Fetcher> {
    binding(env, name)
}

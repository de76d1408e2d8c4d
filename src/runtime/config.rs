//! Settings from `[vars]` and secrets. A blank value counts as unset.
//!
//! A Worker's settings do not change while its isolate lives (a new
//! deployment or secret starts new isolates), so each is read from the
//! runtime once and then answered from memory: the warm path asks for
//! several per request.

use std::cell::RefCell;

use worker::Env;

thread_local! {
    /// The settings read so far: a handful, so a list, searched in place.
    static READ: RefCell<Vec<(&'static str, Option<String>)>> = const { RefCell::new(Vec::new()) };
}

pub fn get(env: &Env, name: &'static str) -> Option<String> {
    let known = READ.with(|read| {
        let read = read.borrow();
        read.iter()
            .find(|(n, _)| *n == name)
            .map(|(_, value)| value.clone())
    });
    if let Some(value) = known {
        return value;
    }
    // Secrets and vars are both plain strings to the runtime.
    let value = env
        .secret(name)
        .map(|value| value.to_string())
        .ok()
        .filter(|value| !value.trim().is_empty());
    READ.with(|read| read.borrow_mut().push((name, value.clone())));
    value
}

/// A numeric setting, clamped to `1..=max`; unset or unparsable gives `default`.
pub fn number(env: &Env, name: &'static str, default: u64, max: u64) -> u64 {
    get(env, name)
        .and_then(|value| value.trim().parse::<u64>().ok())
        .map_or(default, |ms| ms.clamp(1, max))
}

/// A setting in seconds, as milliseconds; unset or unparsable gives
/// `default` seconds, and at least one second.
pub fn seconds_as_ms(env: &Env, name: &'static str, default: u64) -> u64 {
    number(env, name, default, u64::MAX / 1000) * 1000
}

//! Settings from `[vars]` and secrets. A blank value counts as unset.

use worker::Env;

pub fn get(env: &Env, name: &str) -> Option<String> {
    // Secrets and vars are both plain strings to the runtime.
    env.secret(name)
        .map(|value| value.to_string())
        .ok()
        .filter(|value| !value.trim().is_empty())
}

/// A numeric setting, clamped to `1..=max`; unset or unparsable gives `default`.
pub fn number(env: &Env, name: &str, default: u64, max: u64) -> u64 {
    get(env, name)
        .and_then(|value| value.trim().parse::<u64>().ok())
        .map_or(default, |ms| ms.clamp(1, max))
}

/// A setting in seconds, as milliseconds; unset or unparsable gives
/// `default` seconds, and at least one second.
pub fn seconds_as_ms(env: &Env, name: &str, default: u64) -> u64 {
    number(env, name, default, u64::MAX / 1000) * 1000
}

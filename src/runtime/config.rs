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

/// An on/off setting (`on`, `true` or `off`, `false`, in any case); unset
/// gives `default`; anything else is an error naming the setting, so that a
/// typo does not silently keep the default.
pub fn switch(env: &Env, name: &'static str, default: bool) -> Result<bool, String> {
    match get(env, name) {
        None => Ok(default),
        Some(value) => parse_switch(&value)
            .ok_or_else(|| format!("{name} is {value:?}; set it to \"on\" or \"off\"")),
    }
}

fn parse_switch(value: &str) -> Option<bool> {
    match value.trim().to_ascii_lowercase().as_str() {
        "on" | "true" => Some(true),
        "off" | "false" => Some(false),
        _ => None,
    }
}

/// A setting in seconds, as milliseconds; unset or unparsable gives
/// `default` seconds, and at least one second.
pub fn seconds_as_ms(env: &Env, name: &'static str, default: u64) -> u64 {
    number(env, name, default, u64::MAX / 1000) * 1000
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_switch_is_on_or_off_and_nothing_else() {
        for on in ["on", "ON", " true "] {
            assert_eq!(parse_switch(on), Some(true), "{on}");
        }
        for off in ["off", "Off", "false"] {
            assert_eq!(parse_switch(off), Some(false), "{off}");
        }
        for other in ["of", "no", "0", "disabled", ""] {
            assert_eq!(parse_switch(other), None, "{other}");
        }
    }
}

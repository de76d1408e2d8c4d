//! The time of day, for deadlines, durations and message timestamps.

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> u64 {
    worker::Date::now().as_millis()
}

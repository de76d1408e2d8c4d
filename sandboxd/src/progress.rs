//! A running command as a streaming client sees it: when it started and the
//! output captured since the client last looked.
//!
//! The command's captures add to it and the client takes from it whenever it
//! is woken. Output waits here merged per stream, so memory stays within the
//! output caps however small the pieces and however slow the client; the
//! order between stdout and stderr is kept only as far as which of them had
//! output first since the last take.

use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::SystemTime;

use duet_wire::Stream;
use tokio::sync::Notify;

#[derive(Default)]
pub struct Progress {
    state: Mutex<State>,
    changed: Notify,
}

#[derive(Default)]
struct State {
    started: Option<SystemTime>,
    stdout: String,
    stderr: String,
    /// The stream whose waiting output came first.
    first: Option<Stream>,
}

impl Progress {
    pub fn start(&self, at: SystemTime) {
        self.state().started = Some(at);
        self.changed.notify_one();
    }

    pub fn started(&self) -> Option<SystemTime> {
        self.state().started
    }

    pub fn add(&self, stream: Stream, text: &str) {
        let mut state = self.state();
        state.first.get_or_insert(stream);
        match stream {
            Stream::Stdout => state.stdout.push_str(text),
            Stream::Stderr => state.stderr.push_str(text),
        }
        drop(state);
        self.changed.notify_one();
    }

    /// Bytes of output waiting.
    pub fn waiting(&self) -> usize {
        let state = self.state();
        state.stdout.len() + state.stderr.len()
    }

    /// The output waiting, the stream that had it first first.
    pub fn take(&self) -> Vec<(Stream, String)> {
        let mut state = self.state();
        let stdout = (Stream::Stdout, std::mem::take(&mut state.stdout));
        let stderr = (Stream::Stderr, std::mem::take(&mut state.stderr));
        let taken = match state.first.take() {
            Some(Stream::Stderr) => [stderr, stdout],
            _ => [stdout, stderr],
        };
        taken
            .into_iter()
            .filter(|(_, text)| !text.is_empty())
            .collect()
    }

    /// Resolves once something was added since the last call returned (at
    /// once if something was added before it).
    pub async fn changed(&self) {
        self.changed.notified().await;
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // Nothing panics while holding this lock; the state stays usable.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_is_merged_per_stream_and_taken_in_order_of_arrival() {
        let progress = Progress::default();
        progress.add(Stream::Stderr, "e1");
        progress.add(Stream::Stdout, "o1");
        progress.add(Stream::Stderr, "e2");
        assert_eq!(progress.waiting(), 6);
        assert_eq!(
            progress.take(),
            [
                (Stream::Stderr, "e1e2".to_string()),
                (Stream::Stdout, "o1".to_string())
            ]
        );
        assert_eq!(progress.take(), []);
        progress.add(Stream::Stdout, "o2");
        assert_eq!(progress.take(), [(Stream::Stdout, "o2".to_string())]);
    }
}

//! Every wait on something outside the Worker (the model, a container,
//! sandboxd) goes through [`within`] or a [`Deadline`], so none can hang a
//! request.

use std::future::Future;
use std::pin::pin;
use std::time::Duration;

use futures_util::future::{select, Either};
use worker::Delay;

/// The future's output, or `None` if `ms` milliseconds pass first.
pub async fn within<F: Future>(ms: u64, future: F) -> Option<F::Output> {
    Deadline::in_ms(ms).within(future).await
}

/// One end for a series of waits, such as the chunks of a stream: a single
/// timer serves them all, where one [`within`] each would set and clear a
/// timer per wait.
pub struct Deadline(Delay);

impl Deadline {
    pub fn in_ms(ms: u64) -> Self {
        Self(Delay::from(Duration::from_millis(ms)))
    }

    /// The future's output, or `None` once the deadline has passed.
    pub async fn within<F: Future>(&mut self, future: F) -> Option<F::Output> {
        match select(pin!(future), &mut self.0).await {
            Either::Left((output, _)) => Some(output),
            Either::Right(_) => None,
        }
    }
}

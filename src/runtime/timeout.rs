//! Every wait on something outside the Worker (the model, a container,
//! sandboxd) goes through [`within`], so none can hang a request.

use std::future::Future;
use std::pin::pin;
use std::time::Duration;

use futures_util::future::{select, Either};
use worker::Delay;

/// The future's output, or `None` if `ms` milliseconds pass first.
pub async fn within<F: Future>(ms: u64, future: F) -> Option<F::Output> {
    let delay = Delay::from(Duration::from_millis(ms));
    match select(pin!(future), delay).await {
        Either::Left((output, _)) => Some(output),
        Either::Right(_) => None,
    }
}

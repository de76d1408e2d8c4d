//! Giving up a restore part-way. The request handler decides when (its
//! deadline passed, its client went away); the restore looks at every step
//! (waiting for its turn, reading the body, each entry it unpacks) and stops
//! there, leaving the workspace as it was.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use crate::error::Error;

/// Why a restore was given up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Why {
    TimedOut { ms: u64 },
    ClientGone,
}

impl From<Why> for Error {
    fn from(why: Why) -> Self {
        match why {
            Why::TimedOut { ms } => Error::RestoreTimedOut { ms },
            Why::ClientGone => Error::ClientGone,
        }
    }
}

/// Shared by the handler and the restore; the first reason given wins.
pub struct Abandon(watch::Sender<Option<Why>>);

impl Abandon {
    pub fn new() -> Arc<Self> {
        Arc::new(Abandon(watch::Sender::new(None)))
    }

    pub fn give_up(&self, why: Why) {
        self.0.send_if_modified(|now| {
            let first = now.is_none();
            if first {
                *now = Some(why);
            }
            first
        });
    }

    /// The error to stop with, once given up.
    pub fn check(&self) -> Result<(), Error> {
        match *self.0.borrow() {
            Some(why) => Err(why.into()),
            None => Ok(()),
        }
    }

    /// Returns the error to stop with once given up.
    pub async fn given_up(&self) -> Error {
        let mut watching = self.0.subscribe();
        // Err only if the sender is gone, which `self` prevents.
        let why = watching
            .wait_for(Option::is_some)
            .await
            .ok()
            .and_then(|why| *why);
        why.map_or(Error::ClientGone, Error::from)
    }

    /// Gives up after `ms` milliseconds; never returns.
    pub async fn after(&self, ms: u64) -> Infallible {
        tokio::time::sleep(Duration::from_millis(ms)).await;
        self.give_up(Why::TimedOut { ms });
        std::future::pending().await
    }
}

/// Gives up when dropped: a handler is dropped when its client goes away,
/// and by then a restore that finished no longer looks.
pub struct OnDrop(pub Arc<Abandon>);

impl Drop for OnDrop {
    fn drop(&mut self) {
        self.0.give_up(Why::ClientGone);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_first_reason_wins() {
        let abandon = Abandon::new();
        assert!(abandon.check().is_ok());
        drop(OnDrop(Arc::clone(&abandon)));
        abandon.give_up(Why::TimedOut { ms: 5 });
        assert!(matches!(abandon.given_up().await, Error::ClientGone));
        assert!(matches!(abandon.check(), Err(Error::ClientGone)));
    }

    #[tokio::test]
    async fn a_deadline_gives_up_once_past() {
        let abandon = Abandon::new();
        let timer = tokio::spawn({
            let abandon = Arc::clone(&abandon);
            async move { abandon.after(50).await }
        });
        assert!(abandon.check().is_ok());
        let started = std::time::Instant::now();
        let why = abandon.given_up().await;
        assert!(started.elapsed() >= Duration::from_millis(50));
        assert!(matches!(why, Error::RestoreTimedOut { ms: 50 }));
        timer.abort();
    }
}

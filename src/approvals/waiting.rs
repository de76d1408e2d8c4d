//! Where a decision on an approval is told to whoever waits for it in
//! memory: an MCP client's `run_command` waits for a writer within its own
//! request (`agent::mcp`), where an exchange waits in storage and goes on
//! by the alarm. [`pending::Approvals`](super::pending::Approvals) tells
//! every decision here as it makes it, whoever makes it (a writer, the
//! alarm's expiry, the waiting call's own expiry), and every forgetting of
//! the room's approvals, which ends every wait.
//!
//! Plain data and wakers, single-threaded as a Durable Object is: a
//! registry of waiters keyed by approval id. A waiter is registered as it
//! is made, not when first polled, so a decision made while its caller
//! still awaits something else (the approval's publishing) is not missed.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

/// What a waiter learns. The decision itself is the approval's, in
/// storage, where the waiter reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Heard {
    /// Its approval is decided.
    Decided,
    /// The room forgot its approvals (cleaned up, or expired): nothing
    /// will decide this one.
    Forgotten,
}

/// One wait: what it heard, once it has, and the task to wake then.
#[derive(Default)]
struct Slot {
    heard: Cell<Option<Heard>>,
    waker: Cell<Option<Waker>>,
}

/// The waiters of one room's approvals.
#[derive(Default)]
pub struct Waiting {
    waiters: RefCell<Vec<(u64, Rc<Slot>)>>,
}

impl Waiting {
    /// Waits for the decision on approval `id`, from now on.
    pub fn wait(&self, id: u64) -> Waiter<'_> {
        let slot = Rc::new(Slot::default());
        self.waiters.borrow_mut().push((id, Rc::clone(&slot)));
        Waiter {
            waiting: self,
            slot,
        }
    }

    /// Tells the waiters of approval `id` that it is decided.
    pub fn decided(&self, id: u64) {
        self.tell(Some(id), Heard::Decided);
    }

    /// Tells every waiter that its approval is forgotten.
    pub fn forgotten(&self) {
        self.tell(None, Heard::Forgotten);
    }

    /// Tells the waiters of approval `id` (of every approval: `None`), and
    /// lets go of them: an approval is decided once.
    fn tell(&self, id: Option<u64>, heard: Heard) {
        let mut wakers = vec![];
        {
            let mut waiters = self.waiters.borrow_mut();
            let mut at = 0;
            while at < waiters.len() {
                if id.is_some_and(|id| id != waiters[at].0) {
                    at += 1;
                    continue;
                }
                let (_, slot) = waiters.swap_remove(at);
                slot.heard.set(Some(heard));
                wakers.extend(slot.waker.take());
            }
        }
        // Woken once nothing here is borrowed: a waker may poll at once.
        wakers.into_iter().for_each(Waker::wake);
    }
}

/// A wait for one approval's decision: a future of what it hears. Dropped
/// before (a caller that stopped waiting, at its deadline), it leaves the
/// registry.
pub struct Waiter<'a> {
    waiting: &'a Waiting,
    slot: Rc<Slot>,
}

impl Future for Waiter<'_> {
    type Output = Heard;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Heard> {
        match self.slot.heard.get() {
            Some(heard) => Poll::Ready(heard),
            None => {
                self.slot.waker.set(Some(cx.waker().clone()));
                Poll::Pending
            }
        }
    }
}

impl Drop for Waiter<'_> {
    fn drop(&mut self) {
        let mut waiters = self.waiting.waiters.borrow_mut();
        if let Some(at) = waiters
            .iter()
            .position(|(_, slot)| Rc::ptr_eq(slot, &self.slot))
        {
            waiters.swap_remove(at);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::task::Wake;

    use super::*;

    /// Counts its wakes.
    #[derive(Default)]
    struct Wakes(AtomicUsize);

    impl Wake for Wakes {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    impl Wakes {
        fn count(&self) -> usize {
            self.0.load(Ordering::SeqCst)
        }
    }

    fn poll(waiter: &mut Waiter<'_>, wakes: &Arc<Wakes>) -> Poll<Heard> {
        let waker = Waker::from(Arc::clone(wakes));
        Pin::new(waiter).poll(&mut Context::from_waker(&waker))
    }

    fn waiters(waiting: &Waiting) -> usize {
        waiting.waiters.borrow().len()
    }

    #[test]
    fn a_waiter_is_woken_by_its_decision() {
        let waiting = Waiting::default();
        let wakes = Arc::new(Wakes::default());
        let mut waiter = waiting.wait(7);
        assert_eq!(poll(&mut waiter, &wakes), Poll::Pending);
        waiting.decided(8);
        assert_eq!(wakes.count(), 0, "another approval's decision");
        assert_eq!(poll(&mut waiter, &wakes), Poll::Pending);
        waiting.decided(7);
        assert_eq!(wakes.count(), 1);
        assert_eq!(poll(&mut waiter, &wakes), Poll::Ready(Heard::Decided));
        assert_eq!(waiters(&waiting), 0, "told, it left the registry");
    }

    #[test]
    fn a_decision_before_the_first_poll_is_heard() {
        let waiting = Waiting::default();
        let wakes = Arc::new(Wakes::default());
        let mut waiter = waiting.wait(3);
        waiting.decided(3);
        assert_eq!(poll(&mut waiter, &wakes), Poll::Ready(Heard::Decided));
        assert_eq!(wakes.count(), 0, "nothing was pending to wake");
    }

    #[test]
    fn forgetting_wakes_every_waiter() {
        let waiting = Waiting::default();
        let wakes = Arc::new(Wakes::default());
        let (mut one, mut two) = (waiting.wait(1), waiting.wait(2));
        assert_eq!(poll(&mut one, &wakes), Poll::Pending);
        assert_eq!(poll(&mut two, &wakes), Poll::Pending);
        waiting.forgotten();
        assert_eq!(wakes.count(), 2);
        assert_eq!(poll(&mut one, &wakes), Poll::Ready(Heard::Forgotten));
        assert_eq!(poll(&mut two, &wakes), Poll::Ready(Heard::Forgotten));
        assert_eq!(waiters(&waiting), 0);
    }

    #[test]
    fn a_decision_nobody_waits_for_is_told_to_nobody() {
        let waiting = Waiting::default();
        waiting.decided(5);
        waiting.forgotten();
        assert_eq!(waiters(&waiting), 0);
        // A wait begun after the decision hears nothing of it.
        let wakes = Arc::new(Wakes::default());
        let mut late = waiting.wait(5);
        assert_eq!(poll(&mut late, &wakes), Poll::Pending);
    }

    #[test]
    fn two_waiters_of_one_approval_both_hear_it() {
        let waiting = Waiting::default();
        let wakes = Arc::new(Wakes::default());
        let (mut first, mut second) = (waiting.wait(4), waiting.wait(4));
        assert_eq!(poll(&mut first, &wakes), Poll::Pending);
        assert_eq!(poll(&mut second, &wakes), Poll::Pending);
        waiting.decided(4);
        assert_eq!(wakes.count(), 2);
        let heard = Poll::Ready(Heard::Decided);
        assert_eq!(poll(&mut first, &wakes), heard);
        assert_eq!(poll(&mut second, &wakes), heard);
    }

    #[test]
    fn a_waiter_dropped_before_the_decision_leaves_the_registry() {
        let waiting = Waiting::default();
        let kept = waiting.wait(9);
        drop(waiting.wait(9));
        assert_eq!(waiters(&waiting), 1);
        drop(kept);
        assert_eq!(waiters(&waiting), 0);
        waiting.decided(9);
        assert_eq!(waiters(&waiting), 0);
    }
}

//! Stopping blocking work whose caller has given up.
//!
//! A future dropped at a deadline stops at its next `.await`, but work it
//! handed to the blocking pool (reading a directory of manifests, parsing
//! an index, a Git fetch) runs on. Such work checks an [`Interrupt`] at
//! each step and ends with an error once it is raised. The render server
//! raises a render's interrupt at its deadline (or when the controller goes
//! away), and makes it the [current](Interrupt::current) interrupt of the
//! render's task, where the stages that hand work to the blocking pool pick
//! it up ([`spawn_blocking`] carries it to the blocking thread, where
//! [`Interrupt::current`] reads it too); without one (the controller
//! rendering in-process, the CLI) each such stage has a fresh interrupt that
//! nothing raises but its own timeouts.

use std::cell::RefCell;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

tokio::task_local! {
    static CURRENT: Interrupt;
}

std::thread_local! {
    /// The interrupt of the blocking work running on this thread.
    static BLOCKING: RefCell<Option<Interrupt>> = const { RefCell::new(None) };
}

/// [`tokio::task::spawn_blocking`], with the current task's interrupt made
/// the [current](Interrupt::current) one of the blocking work.
pub fn spawn_blocking<R, F>(work: F) -> tokio::task::JoinHandle<R>
where
    F: FnOnce() -> R + Send + 'static,
    R: Send + 'static,
{
    let interrupt = Interrupt::current();
    tokio::task::spawn_blocking(move || interrupt.enter(work))
}

/// [`spawn_blocking`] with a time limit that counts from when the work
/// starts running, not from when it was queued: with the blocking pool
/// full (`--blocking-threads`), work waits its turn and never times out
/// before it began. `Err` when the limit passed (the work runs on until it
/// checks its interrupt; the caller raises it).
pub async fn blocking_within<R, F>(
    limit: std::time::Duration,
    work: F,
) -> Result<Result<R, tokio::task::JoinError>, tokio::time::error::Elapsed>
where
    F: FnOnce() -> R + Send + 'static,
    R: Send + 'static,
{
    let (started, running) = tokio::sync::oneshot::channel::<()>();
    let mut task = spawn_blocking(move || {
        let _ = started.send(());
        work()
    });
    // Resolves when the work starts (or could not: the sender dropped).
    let _ = running.await;
    tokio::time::timeout(limit, &mut task).await
}

/// A flag that work checks to stop early; clones share it.
#[derive(Clone, Debug, Default)]
pub struct Interrupt(Arc<AtomicBool>);

impl Interrupt {
    /// A flag not raised.
    pub fn new() -> Self {
        Self::default()
    }

    /// The current task's interrupt ([`Interrupt::scope`]), else that of
    /// the blocking work on this thread ([`Interrupt::enter`]), else a fresh
    /// one.
    pub fn current() -> Self {
        CURRENT
            .try_with(Clone::clone)
            .ok()
            .or_else(|| BLOCKING.with(|slot| slot.borrow().clone()))
            .unwrap_or_default()
    }

    /// Runs blocking `work` with this as the current interrupt of the thread
    /// (the previous one is back when it returns or unwinds).
    pub fn enter<R>(&self, work: impl FnOnce() -> R) -> R {
        struct Restore(Option<Interrupt>);
        impl Drop for Restore {
            fn drop(&mut self) {
                let previous = self.0.take();
                BLOCKING.with(|slot| *slot.borrow_mut() = previous);
            }
        }
        let previous = BLOCKING.with(|slot| slot.borrow_mut().replace(self.clone()));
        let _restore = Restore(previous);
        work()
    }

    /// Runs `future` with this as the current interrupt of its task.
    pub async fn scope<F: Future>(self, future: F) -> F::Output {
        CURRENT.scope(self, future).await
    }

    /// Asks the work to stop.
    pub fn raise(&self) {
        self.0.store(true, Ordering::Relaxed);
    }

    /// Whether the work should stop.
    pub fn is_raised(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }

    /// The flag itself, for libraries that take one (gitoxide).
    pub fn flag(&self) -> &AtomicBool {
        &self.0
    }

    /// A guard that raises this interrupt when dropped: work handed off by
    /// a future is stopped however the future ends (done, timed out, or
    /// dropped because its caller went away).
    pub fn raise_on_drop(&self) -> RaiseOnDrop {
        RaiseOnDrop(self.clone())
    }
}

/// Raises its interrupt when dropped ([`Interrupt::raise_on_drop`]).
#[derive(Debug)]
pub struct RaiseOnDrop(Interrupt);

impl Drop for RaiseOnDrop {
    fn drop(&mut self) {
        self.0.raise();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_current_interrupt_is_the_scopes_and_shared_by_clones() {
        assert!(!Interrupt::current().is_raised());
        let interrupt = Interrupt::new();
        let seen = interrupt
            .clone()
            .scope(async {
                let current = Interrupt::current();
                tokio::task::spawn_blocking(move || current).await.unwrap()
            })
            .await;
        {
            let _guard = interrupt.raise_on_drop();
        }
        assert!(seen.is_raised(), "the guard raised the scope's interrupt");
        assert!(
            !Interrupt::current().is_raised(),
            "outside the scope: a fresh one"
        );
    }

    #[tokio::test]
    async fn blocking_work_spawned_in_a_scope_sees_its_interrupt() {
        let interrupt = Interrupt::new();
        let seen = interrupt
            .clone()
            .scope(async { spawn_blocking(Interrupt::current).await.unwrap() })
            .await;
        interrupt.raise();
        assert!(
            seen.is_raised(),
            "the blocking thread's interrupt is the scope's"
        );
        let after = tokio::task::spawn_blocking(Interrupt::current)
            .await
            .unwrap();
        assert!(
            !after.is_raised(),
            "the thread's interrupt is reset after the work"
        );
    }
}

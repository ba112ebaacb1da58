//! Reloads of stale entries, and where they run: a [`Reload`] is handed to the spawner the
//! builder was given, or run by the caller that found the entry stale.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

/// A reload of a stale entry, for the [`spawner`](super::AdmissionCacheBuilder::spawner)
/// to run: a `Send + 'static` future that loads the key and stores what it gets (or keeps
/// the old value, if the load fails). Spawn it on a runtime (`tokio::spawn(reload)`), or
/// run it on a thread with [`Reload::run`]. Dropping it unpolled gives the reload up: the
/// entry stays stale, and a later caller reloads it.
#[must_use = "a reload does nothing unless it is run"]
pub struct Reload(Pin<Box<dyn Future<Output = ()> + Send>>);

impl Reload {
    pub(crate) fn new(reload: impl Future<Output = ()> + Send + 'static) -> Self {
        Reload(Box::pin(reload))
    }

    /// Runs the reload to its end on this thread, parking it while the load waits (for a
    /// reload whose load is a closure, a single poll).
    ///
    /// # Examples
    ///
    /// ```
    /// use cuckoo_gate::AdmissionCache;
    ///
    /// let cache: AdmissionCache<u64, u64> = AdmissionCache::builder()
    ///     .capacity(100)
    ///     .spawner(|reload| drop(std::thread::spawn(|| reload.run())))
    ///     .build()?;
    /// # Ok::<(), cuckoo_gate::BuildError>(())
    /// ```
    pub fn run(mut self) {
        let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
        let mut context = Context::from_waker(&waker);
        while self.0.as_mut().poll(&mut context).is_pending() {
            std::thread::park();
        }
    }
}

impl Future for Reload {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        self.0.as_mut().poll(cx)
    }
}

impl fmt::Debug for Reload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Reload")
    }
}

/// Wakes a thread parked in [`Reload::run`].
struct Unpark(std::thread::Thread);

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
}

//! Helpers shared by the loading tests.
#![allow(dead_code)]

use std::sync::mpsc;
use std::thread;
use std::time::Duration;

/// Longest any test waits for its threads: far beyond what the work needs, so that only a
/// hang reaches it.
pub const BOUND: Duration = Duration::from_secs(60);

/// Runs `work` on a thread of its own and fails if it does not finish within [`BOUND`].
pub fn bounded<T: Send + 'static>(what: &str, work: impl FnOnce() -> T + Send + 'static) -> T {
    let (done, finished) = mpsc::channel();
    thread::spawn(move || done.send(work()).unwrap());
    finished.recv_timeout(BOUND).unwrap_or_else(|_| panic!("{what}: hung"))
}

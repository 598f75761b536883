//! Turns at the process's metrics. They are one registry (`metrics`'
//! global recorder): every kubecache a test starts counts into the same
//! series. A test that asserts an exact value or difference of a
//! process-wide series runs its kubecache alone ([`Setup::metrics_alone`](super::Setup));
//! the others share.
//!
//! A sharing test never waits for one that is waiting to run alone: a test
//! may start two kubecaches, and its second would then wait for a test that
//! waits for its first. A test that runs alone waits until no other
//! kubecache runs.

use std::sync::{Mutex, MutexGuard, PoisonError};

use tokio::sync::Notify;

/// The kubecaches running, and whether one of them runs alone.
struct Running {
    shared: usize,
    alone: bool,
}

static RUNNING: Mutex<Running> = Mutex::new(Running {
    shared: 0,
    alone: false,
});
static CHANGED: Notify = Notify::const_new();

/// The kubecaches running (no test panics holding it; a test that panics
/// drops its turn while unwinding, and that still counts).
fn running() -> MutexGuard<'static, Running> {
    RUNNING.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A kubecache's turn, given back when dropped.
pub struct Turn {
    alone: bool,
}

impl Turn {
    /// Waits for a turn: alone (no other kubecache running) or shared (none
    /// running alone).
    pub async fn take(alone: bool) -> Turn {
        loop {
            // Created before the check, so that a change after it wakes us.
            let changed = CHANGED.notified();
            {
                let mut running = running();
                if !running.alone && (!alone || running.shared == 0) {
                    if alone {
                        running.alone = true;
                    } else {
                        running.shared += 1;
                    }
                    return Turn { alone };
                }
            }
            changed.await;
        }
    }
}

impl Drop for Turn {
    fn drop(&mut self) {
        let mut running = running();
        if self.alone {
            running.alone = false;
        } else {
            running.shared -= 1;
        }
        CHANGED.notify_waiters();
    }
}

//! Seats for large initial sends: at most so many at once, the others
//! queued in arrival order, as API Priority and Fairness seats the
//! initialization of kube-apiserver's watches.
//!
//! A watch's initial events (a streaming list, `sendInitialEvents=true`,
//! or a watch from the current state) and a list of many objects write
//! megabytes each. Two thousand of them at once kept every async worker
//! writing: `/healthz` and GETs waited seconds, and the consistent reads
//! of the storm itself timed out (504). With seats, a storm's members wait
//! their turn (each once its consistent read is done, so the queue never
//! counts against the read wait) and everything else is answered.
//!
//! A send takes a seat only when it has more candidate objects than one
//! page of client-go's default (500): a page, a namespace's few objects
//! or one object never queue behind a storm. A seat is held until the send
//! is written (a client that stops reading holds it at most the
//! write-stall budget).

use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

/// Objects from which a send is large: one page of client-go's default
/// `limit` (500).
const LARGE: usize = 500;

/// The seats, shared by every resource.
#[derive(Debug)]
pub(crate) struct Seats {
    /// Tokio's semaphore is fair: waiters are seated in arrival order.
    seats: Arc<Semaphore>,
}

/// A large send's seat: freed when dropped.
pub(crate) struct Seat {
    _permit: OwnedSemaphorePermit,
    _in_use: Gauge,
}

impl Seats {
    /// `seats` seats.
    pub fn new(seats: usize) -> Seats {
        Seats {
            seats: Arc::new(Semaphore::new(seats)),
        }
    }

    /// A seat for a send of up to `objects` objects, once one is free;
    /// `None` for a small send, which needs none.
    pub async fn take(&self, objects: usize) -> Option<Seat> {
        if objects <= LARGE {
            return None;
        }
        let asked = Instant::now();
        let queued = Gauge::up("kubecache_initial_send_queue");
        let permit = self
            .seats
            .clone()
            .acquire_owned()
            .await
            .expect("the semaphore is never closed");
        drop(queued);
        metrics::histogram!("kubecache_initial_send_wait_seconds")
            .record(asked.elapsed().as_secs_f64());
        Some(Seat {
            _permit: permit,
            _in_use: Gauge::up("kubecache_initial_send_seats_in_use"),
        })
    }
}

/// One more in a gauge while held: a send waiting in the queue (until
/// seated or gone) or seated.
struct Gauge(&'static str);

impl Gauge {
    fn up(name: &'static str) -> Gauge {
        metrics::gauge!(name).increment(1);
        Gauge(name)
    }
}

impl Drop for Gauge {
    fn drop(&mut self) {
        metrics::gauge!(self.0).decrement(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn large_sends_are_seated_in_arrival_order_and_small_ones_never_wait() {
        let seats = Arc::new(Seats::new(2));
        let first = seats.take(LARGE + 1).await.expect("a seat");
        let _second = seats.take(LARGE + 1).await.expect("a seat");
        assert!(seats.take(LARGE).await.is_none(), "small: no seat, no wait");
        let (order, mut seated) = tokio::sync::mpsc::unbounded_channel();
        for i in 0..3 {
            let (seats, order) = (seats.clone(), order.clone());
            tokio::spawn(async move {
                let seat = seats.take(LARGE + 1).await;
                order.send(i).unwrap();
                // Held until the test ends.
                std::future::pending::<()>().await;
                drop(seat);
            });
            tokio::task::yield_now().await;
        }
        tokio::task::yield_now().await;
        assert!(seated.try_recv().is_err(), "every seat is taken");
        drop(first);
        assert_eq!(seated.recv().await, Some(0), "the first to ask");
        assert!(seated.try_recv().is_err());
    }
}

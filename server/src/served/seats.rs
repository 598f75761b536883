//! Seats for large initial sends: at most so many at once, the others
//! queued fairly between flows, as API Priority and Fairness seats the
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
//! The queue is fair between [`Flow`]s (a client at an address), as APF
//! queues by flow: a flow's sends enter the seats' queue one at a time,
//! so a send of another flow waits for at most one send of each flow
//! queued before it, not for the whole of a storm. Within a flow, sends
//! are seated in arrival order.
//!
//! A send takes a seat only when it has more candidate objects than one
//! page of client-go's default (500): a page, a namespace's few objects
//! or one object never queue behind a storm. A seat is held until the send
//! is written (a client that stops reading holds it at most the
//! write-stall budget).

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::net::IpAddr;
use std::sync::Arc;

use parking_lot::Mutex;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

use super::Owner;

/// Objects from which a send is large: one page of client-go's default
/// `limit` (500).
const LARGE: usize = 500;

/// Who asks: the client whose watches and held pages count together (see
/// [`Owner`]), at the address it asks from. Large sends queue fairly
/// between flows: two replicas of one operator (the same user, two pods)
/// are two flows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Flow {
    /// The client, when one is known.
    pub owner: Option<Owner>,
    peer: Option<IpAddr>,
}

impl Flow {
    /// `owner` asking from `peer`.
    pub fn new(owner: Option<Owner>, peer: Option<IpAddr>) -> Flow {
        Flow { owner, peer }
    }
}

/// The seats, shared by every resource.
#[derive(Debug)]
pub(crate) struct Seats {
    /// Tokio's semaphore is fair: waiters are seated in arrival order,
    /// and each flow has at most one waiter there.
    seats: Arc<Semaphore>,
    /// The gate of each flow with a send waiting or being let through:
    /// one send of the flow at a time passes into the seats' queue.
    gates: Arc<Mutex<HashMap<Flow, Gate>>>,
}

/// A flow's gate, and how many of its sends are at it or past it and not
/// yet seated (the gate is dropped with the last).
#[derive(Debug)]
struct Gate {
    turn: Arc<Semaphore>,
    sends: usize,
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
            gates: Arc::default(),
        }
    }

    /// A seat for `flow`'s send of up to `objects` objects, once one is
    /// free and it is the flow's turn; `None` for a small send, which
    /// needs none.
    pub async fn take(&self, objects: usize, flow: Flow) -> Option<Seat> {
        if objects <= LARGE {
            return None;
        }
        let asked = Instant::now();
        let queued = Gauge::up("kubecache_initial_send_queue");
        let at_gate = AtGate::enter(&self.gates, flow);
        let turn = at_gate.turn.clone().acquire_owned().await;
        let permit = self.seats.clone().acquire_owned().await;
        drop((turn, at_gate, queued));
        let permit = permit.expect("the semaphore is never closed");
        metrics::histogram!("kubecache_initial_send_wait_seconds")
            .record(asked.elapsed().as_secs_f64());
        Some(Seat {
            _permit: permit,
            _in_use: Gauge::up("kubecache_initial_send_seats_in_use"),
        })
    }
}

/// A send at its flow's gate or past it, until seated or gone.
struct AtGate<'a> {
    gates: &'a Mutex<HashMap<Flow, Gate>>,
    flow: Flow,
    turn: Arc<Semaphore>,
}

impl<'a> AtGate<'a> {
    fn enter(gates: &'a Mutex<HashMap<Flow, Gate>>, flow: Flow) -> AtGate<'a> {
        let mut all = gates.lock();
        let gate = all.entry(flow).or_insert_with(|| Gate {
            turn: Arc::new(Semaphore::new(1)),
            sends: 0,
        });
        gate.sends += 1;
        let turn = gate.turn.clone();
        AtGate { gates, flow, turn }
    }
}

impl Drop for AtGate<'_> {
    fn drop(&mut self) {
        if let Entry::Occupied(mut gate) = self.gates.lock().entry(self.flow) {
            gate.get_mut().sends -= 1;
            if gate.get().sends == 0 {
                gate.remove();
            }
        }
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
    use tokio::sync::mpsc::UnboundedSender;

    use super::*;

    /// A flow telling clients apart by `n`.
    fn flow(n: u8) -> Flow {
        Flow::new(None, Some(IpAddr::from([10, 0, 0, n])))
    }

    /// Starts `flow`'s send `id`, which reports `id` on `order` once
    /// seated and then holds its seat until the test ends.
    fn send(seats: &Arc<Seats>, flow: Flow, id: u32, order: &UnboundedSender<u32>) {
        let (seats, order) = (seats.clone(), order.clone());
        tokio::spawn(async move {
            let seat = seats.take(LARGE + 1, flow).await;
            order.send(id).unwrap();
            std::future::pending::<()>().await;
            drop(seat);
        });
    }

    #[tokio::test(start_paused = true)]
    async fn large_sends_are_seated_in_arrival_order_and_small_ones_never_wait() {
        let seats = Arc::new(Seats::new(2));
        let first = seats.take(LARGE + 1, flow(1)).await.expect("a seat");
        let _second = seats.take(LARGE + 1, flow(1)).await.expect("a seat");
        assert!(
            seats.take(LARGE, flow(1)).await.is_none(),
            "small: no seat, no wait"
        );
        let (order, mut seated) = tokio::sync::mpsc::unbounded_channel();
        for i in 0..3 {
            send(&seats, flow(1), i, &order);
            tokio::task::yield_now().await;
        }
        tokio::task::yield_now().await;
        assert!(seated.try_recv().is_err(), "every seat is taken");
        drop(first);
        assert_eq!(seated.recv().await, Some(0), "the first to ask");
        assert!(seated.try_recv().is_err());
    }

    #[tokio::test(start_paused = true)]
    async fn a_flow_waits_for_one_send_of_each_flow_before_it_not_for_a_whole_storm() {
        let seats = Arc::new(Seats::new(1));
        let (order, mut seated) = tokio::sync::mpsc::unbounded_channel();
        let held = seats.take(LARGE + 1, flow(1)).await.expect("a seat");
        // A storm of ten from flow 1, then one send each from flows 2 and 3.
        for id in 10..20 {
            send(&seats, flow(1), id, &order);
        }
        send(&seats, flow(2), 2, &order);
        send(&seats, flow(3), 3, &order);
        for _ in 0..3 {
            tokio::task::yield_now().await;
        }
        drop(held);
        let mut first = Vec::new();
        for _ in 0..4 {
            first.push(seated.recv().await.unwrap());
            // A seated send holds its seat for good: free one by hand.
            seats.seats.add_permits(1);
        }
        assert_eq!(
            first,
            [10, 2, 3, 11],
            "one of the storm, then the others' turn"
        );
        assert!(seats.gates.lock().contains_key(&flow(1)));
        assert!(
            !seats.gates.lock().contains_key(&flow(2)),
            "a flow's gate goes with its last send"
        );
    }
}

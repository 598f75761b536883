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
//! A seat is for sending: one whose send has made no progress for
//! [`STALL`] (its client does not read) is taken back for a send that
//! waits, and its send queues again for a seat when its client reads
//! again. Otherwise a few clients that open large watches and never read
//! would hold every seat for the write-stall budget, and everyone's large
//! sends would wait behind them.
//!
//! A send takes a seat only when it has more candidate objects than one
//! page of client-go's default (500): a page, a namespace's few objects
//! or one object never queue behind a storm.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::task::{Context, Poll, ready};
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

use super::Owner;

/// Objects from which a send is large: one page of client-go's default
/// `limit` (500).
const LARGE: usize = 500;

/// How long a seated send may make no progress before its seat may be
/// given to a waiting send.
pub(crate) const STALL: Duration = Duration::from_secs(1);

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
pub(crate) struct Seats(Arc<Inner>);

#[derive(Debug)]
struct Inner {
    /// Tokio's semaphore is fair: waiters are seated in arrival order,
    /// and each flow has at most one waiter there.
    seats: Arc<Semaphore>,
    /// The gate of each flow with a send waiting or being let through:
    /// one send of the flow at a time passes into the seats' queue.
    gates: Mutex<HashMap<Flow, Gate>>,
    /// The seats held, to take back stalled ones.
    leases: Mutex<Vec<Arc<Lease>>>,
    /// What leases count their progress from.
    epoch: Instant,
}

/// A flow's gate, and how many of its sends are at it or past it and not
/// yet seated (the gate is dropped with the last).
#[derive(Debug)]
struct Gate {
    turn: Arc<Semaphore>,
    sends: usize,
}

/// One holding of a seat: held until released by its send or taken back.
#[derive(Debug)]
struct Lease {
    state: AtomicU8,
    /// Milliseconds from [`Inner::epoch`] of the send's last progress.
    progress: AtomicU64,
}

const HELD: u8 = 0;
const TAKEN_BACK: u8 = 1;
const RELEASED: u8 = 2;

/// A seat being taken again, after it was taken back.
type Retaking = Pin<Box<dyn Future<Output = (Arc<Lease>, OwnedSemaphorePermit)> + Send + Sync>>;

/// A large send's seat: freed when dropped.
pub(crate) struct Seat {
    inner: Arc<Inner>,
    flow: Flow,
    lease: Arc<Lease>,
    /// `None` once taken back.
    permit: Option<OwnedSemaphorePermit>,
    retaking: Option<Retaking>,
}

impl Seats {
    /// `seats` seats.
    pub fn new(seats: usize) -> Seats {
        Seats(Arc::new(Inner {
            seats: Arc::new(Semaphore::new(seats)),
            gates: Mutex::default(),
            leases: Mutex::default(),
            epoch: Instant::now(),
        }))
    }

    /// A seat for `flow`'s send of up to `objects` objects, once one is
    /// free and it is the flow's turn; `None` for a small send, which
    /// needs none.
    pub async fn take(&self, objects: usize, flow: Flow) -> Option<Seat> {
        if objects <= LARGE {
            return None;
        }
        let (lease, permit) = Inner::seat(self.0.clone(), flow).await;
        Some(Seat {
            inner: self.0.clone(),
            flow,
            lease,
            permit: Some(permit),
            retaking: None,
        })
    }
}

impl Inner {
    /// Waits for a seat for `flow`, taking back stalled ones meanwhile.
    async fn seat(inner: Arc<Inner>, flow: Flow) -> (Arc<Lease>, OwnedSemaphorePermit) {
        let asked = Instant::now();
        let queued = Gauge::up("kubecache_initial_send_queue");
        let at_gate = AtGate::enter(&inner.gates, flow);
        let turn = at_gate.turn.clone().acquire_owned().await;
        let free = inner.seats.clone().acquire_owned();
        tokio::pin!(free);
        let mut check = tokio::time::interval(STALL / 4);
        let permit = loop {
            tokio::select! {
                biased;
                permit = &mut free => break permit.expect("the semaphore is never closed"),
                _ = check.tick() => inner.take_back_stalled(),
            }
        };
        drop((turn, at_gate, queued));
        metrics::histogram!("kubecache_initial_send_wait_seconds")
            .record(asked.elapsed().as_secs_f64());
        metrics::gauge!("kubecache_initial_send_seats_in_use").increment(1);
        let lease = Arc::new(Lease {
            state: AtomicU8::new(HELD),
            progress: AtomicU64::new(inner.now()),
        });
        inner.leases.lock().push(lease.clone());
        (lease, permit)
    }

    /// Gives back the seats of sends stalled for [`STALL`] or longer.
    fn take_back_stalled(&self) {
        let now = self.now();
        let stall = STALL.as_millis() as u64;
        self.leases.lock().retain(|lease| {
            let stalled = now.saturating_sub(lease.progress.load(Ordering::Relaxed)) >= stall;
            if !stalled || !lease.end(TAKEN_BACK) {
                return true;
            }
            self.seats.add_permits(1);
            metrics::gauge!("kubecache_initial_send_seats_in_use").decrement(1);
            metrics::counter!("kubecache_initial_send_seats_taken_back_total").increment(1);
            false
        });
    }

    /// Milliseconds since [`Inner::epoch`].
    fn now(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }
}

impl Lease {
    /// Ends a held lease as `how`; `false` if it had ended already.
    fn end(&self, how: u8) -> bool {
        self.state
            .compare_exchange(HELD, how, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }
}

impl Seat {
    /// Ready once the send holds its seat: at once, unless the seat was
    /// taken back while the send stalled; then once it has one again.
    pub fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        if self.lease.state.load(Ordering::Acquire) == HELD {
            return Poll::Ready(());
        }
        // Its place was given back when it was taken back.
        if let Some(permit) = self.permit.take() {
            permit.forget();
        }
        let retaking = self
            .retaking
            .get_or_insert_with(|| Box::pin(Inner::seat(self.inner.clone(), self.flow)));
        let (lease, permit) = ready!(retaking.as_mut().poll(cx));
        self.retaking = None;
        self.lease = lease;
        self.permit = Some(permit);
        Poll::Ready(())
    }

    /// As [`Seat::poll_ready`], as a future.
    pub async fn ready(&mut self) {
        std::future::poll_fn(|cx| self.poll_ready(cx)).await;
    }

    /// The send made progress.
    pub fn progressed(&self) {
        self.lease
            .progress
            .store(self.inner.now(), Ordering::Relaxed);
    }
}

impl Drop for Seat {
    fn drop(&mut self) {
        let Some(permit) = self.permit.take() else {
            return;
        };
        if self.lease.end(RELEASED) {
            self.inner
                .leases
                .lock()
                .retain(|lease| !Arc::ptr_eq(lease, &self.lease));
            metrics::gauge!("kubecache_initial_send_seats_in_use").decrement(1);
            drop(permit);
        } else {
            // Taken back meanwhile: its place was given back then.
            permit.forget();
        }
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

/// One more in a gauge while held: a send waiting in the queue, until
/// seated or gone.
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
    /// seated, then stalls for good.
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
        let _held = seats.take(LARGE + 1, flow(1)).await.expect("a seat");
        // A storm of ten from flow 1, then one send each from flows 2 and
        // 3. Each seated send stalls, so its seat is taken back for the
        // next.
        for id in 10..20 {
            send(&seats, flow(1), id, &order);
        }
        send(&seats, flow(2), 2, &order);
        send(&seats, flow(3), 3, &order);
        let mut first = Vec::new();
        for _ in 0..4 {
            first.push(seated.recv().await.unwrap());
        }
        assert_eq!(
            first,
            [10, 2, 3, 11],
            "one of the storm, then the others' turn"
        );
        assert!(seats.0.gates.lock().contains_key(&flow(1)));
        assert!(
            !seats.0.gates.lock().contains_key(&flow(2)),
            "a flow's gate goes with its last send"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_stalled_send_gives_its_seat_to_a_waiting_one_and_queues_again_when_it_resumes() {
        let seats = Arc::new(Seats::new(1));
        let mut sending = seats.take(LARGE + 1, flow(1)).await.expect("a seat");
        let (order, mut seated) = tokio::sync::mpsc::unbounded_channel();
        let waiting = {
            let (seats, order) = (seats.clone(), order.clone());
            tokio::spawn(async move {
                let seat = seats.take(LARGE + 1, flow(2)).await;
                order.send(2).unwrap();
                seat
            })
        };
        // A send that makes progress keeps its seat.
        for _ in 0..10 {
            tokio::time::sleep(STALL / 2).await;
            sending.progressed();
        }
        assert!(seated.try_recv().is_err(), "kept while sending");
        // Stalled, it loses it to the waiting send ...
        assert_eq!(seated.recv().await, Some(2));
        let other = waiting.await.unwrap();
        // ... and, resuming, waits for a seat again.
        let resumed = tokio::time::timeout(STALL / 2, sending.ready()).await;
        assert!(resumed.is_err(), "no seat while the other sends");
        drop(other);
        sending.ready().await;
        sending.progressed();
        drop(sending);
        assert_eq!(seats.0.seats.available_permits(), 1, "every seat back");
        assert!(seats.0.leases.lock().is_empty());
    }
}

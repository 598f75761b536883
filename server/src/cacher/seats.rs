//! Seats for large initial sends: at most so many at once, the others
//! queued by size, then fairly between flows, in bounded queues, as API
//! Priority and Fairness (APF) seats the initialization of kube-apiserver's
//! watches.
//!
//! A watch's initial events (a streaming list, `sendInitialEvents=true`,
//! or a watch from the current state) and a list of many objects write
//! megabytes each. Two thousand of them at once kept every async worker
//! writing: `/healthz` and GETs waited seconds, and the consistent reads
//! of the storm itself timed out (504). With seats, a storm's members wait
//! their turn (each once its consistent read is done, so the queue never
//! counts against the read wait) and everything else is answered.
//!
//! What is taken from APF, and what is not:
//! - **Flows by client.** A [`Flow`] is the client whose watches count
//!   together (its user, or its address when anonymous), wherever it asks
//!   from: a tenant asking from twenty addresses is one flow. Within a
//!   size class, a flow's sends join the queue one at a time (the next
//!   once the last is seated), so a send of another flow waits for at
//!   most one send of each flow queued before it, not for a whole storm
//!   (APF's fair queuing, round robin).
//! - **Queue length limits with 429.** A flow has at most
//!   [`QUEUE_LENGTH`] sends waiting (APF's default `queueLengthLimit`);
//!   one more gets 429 with `Retry-After` at once, and a send that waits
//!   [`QUEUE_WAIT`] gets it then (APF rejects a request that waits a
//!   quarter of its 60 s timeout). Anything waiting for a seat is thus
//!   answered or cut within that time, read or not.
//! - **Priority by size instead of priority levels.** APF's levels come
//!   from FlowSchemas an operator writes; kubecache knows only a send's
//!   size, so it orders by that: sends wait in size classes (powers of
//!   two of their objects), a smaller class is always seated first, and
//!   a send of a smaller class takes the seat of the largest seated send
//!   of a larger class, which queues again for the rest of its send (APF
//!   never preempts; it need not, as its seats are held for a request's
//!   execution, not for a client's reading). A tenant's list of 1,600
//!   pods thus waits for no send of 20,000, however many are queued.
//!   APF's shuffle sharding is left out: it bounds how many queues one
//!   flow may fill when flows are hashed into few queues; here every flow
//!   has its own.
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

use std::net::IpAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::task::{Context, Poll, ready};
use std::time::Duration;

use kubecache_wire::Status;
use parking_lot::Mutex;
use tokio::sync::oneshot;
use tokio::time::Instant;

use super::Owner;

/// Objects from which a send is large: one page of client-go's default
/// `limit` (500).
const LARGE: usize = 500;

/// How long a seated send may make no progress before its seat may be
/// given to a waiting send.
pub(crate) const STALL: Duration = Duration::from_secs(1);

/// Sends of one flow that may wait at once: APF's default
/// `queueLengthLimit`.
pub(crate) const QUEUE_LENGTH: usize = 50;

/// How long a send may wait for a seat, each time it waits: APF's wait
/// limit, a quarter of kube-apiserver's 60 s request timeout.
pub(crate) const QUEUE_WAIT: Duration = Duration::from_secs(15);

/// Who asks: the client whose watches and held pages count together (see
/// [`Owner`]), and the address it asks from (the flow only when no owner
/// is known).
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

    /// What the queue tells apart: the owner, from wherever it asks.
    fn key(self) -> Flow {
        Flow {
            owner: self.owner,
            peer: self.peer.filter(|_| self.owner.is_none()),
        }
    }
}

/// The size class of a send of `objects`: its power of two.
fn class(objects: usize) -> u32 {
    usize::BITS - objects.leading_zeros()
}

/// The seats, shared by every resource.
#[derive(Debug)]
pub(crate) struct Seats(Arc<Inner>);

#[derive(Debug)]
struct Inner {
    state: Mutex<State>,
    /// What leases count their progress from.
    epoch: Instant,
}

#[derive(Debug, Default)]
struct State {
    /// Seats free.
    free: usize,
    /// The sends waiting, in arrival order.
    waiting: Vec<Waiter>,
    /// The seats held, to take back stalled or preempted ones.
    held: Vec<Arc<Lease>>,
    /// Sends that have waited so far: each waiter's id.
    arrivals: u64,
    /// Turns given so far.
    turns: u64,
}

/// A send waiting for a seat.
#[derive(Debug)]
struct Waiter {
    id: u64,
    flow: Flow,
    class: u32,
    /// Its place in its class, given when it is the first of its flow's
    /// sends of the class waiting: each flow's sends of a class join one
    /// at a time.
    turn: Option<u64>,
    seated: oneshot::Sender<Arc<Lease>>,
}

/// One holding of a seat: held until released by its send or taken back.
#[derive(Debug)]
struct Lease {
    state: AtomicU8,
    /// Milliseconds from [`Inner::epoch`] of the send's last progress.
    progress: AtomicU64,
    class: u32,
}

const HELD: u8 = 0;
const TAKEN_BACK: u8 = 1;
const RELEASED: u8 = 2;

/// A seat being taken again, after it was taken back.
type Retaking = Pin<Box<dyn Future<Output = Result<Arc<Lease>, Status>> + Send + Sync>>;

/// A large send's seat: freed when dropped.
pub(crate) struct Seat {
    inner: Arc<Inner>,
    flow: Flow,
    lease: Arc<Lease>,
    retaking: Option<Retaking>,
}

impl Seats {
    /// `seats` seats.
    pub fn new(seats: usize) -> Seats {
        Seats(Arc::new(Inner {
            state: Mutex::new(State {
                free: seats,
                ..State::default()
            }),
            epoch: Instant::now(),
        }))
    }

    /// A seat for `flow`'s send of up to `objects` objects, once it is its
    /// turn; `None` for a small send, which needs none.
    ///
    /// # Errors
    ///
    /// 429 `TooManyRequests` when `flow` already has [`QUEUE_LENGTH`]
    /// sends waiting, or once this one has waited [`QUEUE_WAIT`].
    pub async fn take(&self, objects: usize, flow: Flow) -> Result<Option<Seat>, Status> {
        if objects <= LARGE {
            return Ok(None);
        }
        let flow = flow.key();
        let lease = Inner::seat(self.0.clone(), flow, class(objects), true).await?;
        Ok(Some(Seat {
            inner: self.0.clone(),
            flow,
            lease,
            retaking: None,
        }))
    }
}

impl Inner {
    /// Waits for a seat for `flow`'s send of size `class`, taking back
    /// stalled ones meanwhile; `bounded`: refused if the flow's queue is
    /// full (a send queuing again is not).
    async fn seat(
        inner: Arc<Inner>,
        flow: Flow,
        class: u32,
        bounded: bool,
    ) -> Result<Arc<Lease>, Status> {
        let asked = Instant::now();
        let mut waiting = inner.enqueue(flow, class, bounded)?;
        let queued = Gauge::up("kubecache_initial_send_queue");
        let limit = tokio::time::sleep(QUEUE_WAIT);
        tokio::pin!(limit);
        let mut check = tokio::time::interval(STALL / 4);
        let lease = loop {
            let seated = waiting.seated.as_mut().expect("taken once, below");
            tokio::select! {
                biased;
                lease = seated => break lease.expect("a waiter is dropped only once seated"),
                () = &mut limit => return Err(rejected("queue_wait", format!(
                    "waited {} s for a seat among large sends (lists and watches' initial events of more than {LARGE} objects); retry later",
                    QUEUE_WAIT.as_secs()
                ))),
                _ = check.tick() => inner.take_back_stalled(),
            }
        };
        waiting.seated = None;
        drop((waiting, queued));
        metrics::histogram!("kubecache_initial_send_wait_seconds")
            .record(asked.elapsed().as_secs_f64());
        Ok(lease)
    }

    /// Queues `flow`'s send, preempting a larger seated one if no seat is
    /// free.
    fn enqueue(&self, flow: Flow, class: u32, bounded: bool) -> Result<Waiting<'_>, Status> {
        let mut state = self.state.lock();
        let queued = state.waiting.iter().filter(|w| w.flow == flow).count();
        if bounded && queued >= QUEUE_LENGTH {
            return Err(rejected(
                "queue_full",
                format!(
                    "too many large sends queued: this client already has {QUEUE_LENGTH} lists or watches of more than {LARGE} objects waiting for a seat; retry later"
                ),
            ));
        }
        let (seated, receiver) = oneshot::channel();
        let id = state.arrivals;
        state.arrivals += 1;
        let first = !state
            .waiting
            .iter()
            .any(|w| w.flow == flow && w.class == class);
        let turn = first.then(|| state.turn());
        state.waiting.push(Waiter {
            id,
            flow,
            class,
            turn,
            seated,
        });
        if state.free == 0 {
            self.preempt_for(&mut state, class);
        }
        self.grant(&mut state);
        Ok(Waiting {
            inner: self,
            id,
            seated: Some(receiver),
        })
    }

    /// Gives free seats to the first waiting sends: the smallest class,
    /// then in turn.
    fn grant(&self, state: &mut State) {
        while state.free > 0 {
            let next = state
                .waiting
                .iter()
                .enumerate()
                .filter_map(|(i, waiter)| Some(((waiter.class, waiter.turn?), i)))
                .min();
            let Some((_, i)) = next else { return };
            let waiter = state.remove(i);
            let lease = Arc::new(Lease {
                state: AtomicU8::new(HELD),
                progress: AtomicU64::new(self.now()),
                class: waiter.class,
            });
            state.free -= 1;
            state.held.push(lease.clone());
            metrics::gauge!("kubecache_initial_send_seats_in_use").increment(1);
            // A waiter leaves the queue before it drops its receiver.
            let _ = waiter.seated.send(lease);
        }
    }

    /// Takes the seat of the largest seated send larger than `class`.
    fn preempt_for(&self, state: &mut State, class: u32) {
        let larger = state
            .held
            .iter()
            .filter(|lease| lease.class > class)
            .max_by_key(|lease| lease.class)
            .cloned();
        if let Some(lease) = larger.filter(|lease| lease.end(TAKEN_BACK)) {
            state.give_back(&lease);
            metrics::counter!("kubecache_initial_send_seats_preempted_total").increment(1);
        }
    }

    /// Gives back the seats of sends stalled for [`STALL`] or longer.
    fn take_back_stalled(&self) {
        let now = self.now();
        let stall = STALL.as_millis() as u64;
        let mut state = self.state.lock();
        let stalled: Vec<Arc<Lease>> = state
            .held
            .iter()
            .filter(|lease| now.saturating_sub(lease.progress.load(Ordering::Relaxed)) >= stall)
            .cloned()
            .collect();
        for lease in stalled.iter().filter(|lease| lease.end(TAKEN_BACK)) {
            state.give_back(lease);
            metrics::counter!("kubecache_initial_send_seats_taken_back_total").increment(1);
        }
        self.grant(&mut state);
    }

    /// Frees the seat of `lease`, released by its send.
    fn release(&self, lease: &Arc<Lease>) {
        if lease.end(RELEASED) {
            let mut state = self.state.lock();
            state.give_back(lease);
            self.grant(&mut state);
        }
    }

    /// Milliseconds since [`Inner::epoch`].
    fn now(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }
}

impl State {
    /// The next turn.
    fn turn(&mut self) -> u64 {
        self.turns += 1;
        self.turns
    }

    /// Takes the waiter at `i` out of the queue; the next send of its
    /// flow and class, if any, gets its turn.
    fn remove(&mut self, i: usize) -> Waiter {
        let waiter = self.waiting.remove(i);
        let next = self
            .waiting
            .iter()
            .position(|w| w.flow == waiter.flow && w.class == waiter.class);
        if let Some(next) = next.filter(|_| waiter.turn.is_some()) {
            let turn = self.turn();
            self.waiting[next].turn = Some(turn);
        }
        waiter
    }

    /// Frees the seat `lease` held (ended just now).
    fn give_back(&mut self, lease: &Arc<Lease>) {
        self.held.retain(|held| !Arc::ptr_eq(held, lease));
        self.free += 1;
        metrics::gauge!("kubecache_initial_send_seats_in_use").decrement(1);
    }
}

/// The 429 of a send refused a seat for `reason`.
fn rejected(reason: &'static str, message: String) -> Status {
    metrics::counter!("kubecache_initial_send_rejected_total", "reason" => reason).increment(1);
    let mut status = Status::too_many_requests(1);
    status.message = message;
    status
}

/// A send in the queue: leaves it when dropped, and frees the seat it was
/// given if it did not take it.
struct Waiting<'a> {
    inner: &'a Inner,
    id: u64,
    /// `None` once the seat is taken.
    seated: Option<oneshot::Receiver<Arc<Lease>>>,
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        {
            let mut state = self.inner.state.lock();
            if let Some(i) = state.waiting.iter().position(|w| w.id == self.id) {
                state.remove(i);
            }
        }
        // Seated before it left: the seat is in the channel.
        if let Some(Ok(lease)) = self.seated.as_mut().map(oneshot::Receiver::try_recv) {
            self.inner.release(&lease);
        }
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
    /// taken back (the send stalled, or a smaller one took it); then once
    /// it has one again.
    ///
    /// # Errors
    ///
    /// 429 once it has waited [`QUEUE_WAIT`] for it again: the send ends.
    pub fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Status>> {
        if self.lease.state.load(Ordering::Acquire) == HELD {
            return Poll::Ready(Ok(()));
        }
        let retaking = self.retaking.get_or_insert_with(|| {
            let class = self.lease.class;
            Box::pin(Inner::seat(self.inner.clone(), self.flow, class, false))
        });
        let seated = ready!(retaking.as_mut().poll(cx));
        self.retaking = None;
        self.lease = seated?;
        Poll::Ready(Ok(()))
    }

    /// As [`Seat::poll_ready`], as a future.
    pub async fn ready(&mut self) -> Result<(), Status> {
        std::future::poll_fn(|cx| self.poll_ready(cx)).await
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
        self.inner.release(&self.lease);
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

    /// An anonymous client telling clients apart by address `n`.
    fn flow(n: u8) -> Flow {
        Flow::new(None, Some(IpAddr::from([10, 0, 0, n])))
    }

    /// Starts `flow`'s send `id` of `objects`, which reports `id` on
    /// `order` once seated, then stalls for good.
    fn send(seats: &Arc<Seats>, flow: Flow, objects: usize, id: u32, order: &UnboundedSender<u32>) {
        let (seats, order) = (seats.clone(), order.clone());
        tokio::spawn(async move {
            let seat = seats.take(objects, flow).await;
            order.send(id).unwrap();
            std::future::pending::<()>().await;
            drop(seat);
        });
    }

    /// A seat for a large send of `flow`, which must be free.
    async fn seated(seats: &Seats, flow: Flow) -> Seat {
        seats.take(LARGE + 1, flow).await.unwrap().expect("a seat")
    }

    #[tokio::test(start_paused = true)]
    async fn large_sends_are_seated_in_arrival_order_and_small_ones_never_wait() {
        let seats = Arc::new(Seats::new(2));
        let first = seated(&seats, flow(1)).await;
        let _second = seated(&seats, flow(1)).await;
        assert!(
            seats.take(LARGE, flow(1)).await.unwrap().is_none(),
            "small: no seat, no wait"
        );
        let (order, mut seated) = tokio::sync::mpsc::unbounded_channel();
        for i in 0..3 {
            send(&seats, flow(1), LARGE + 1, i, &order);
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
        let _held = self::seated(&seats, flow(1)).await;
        // A storm of ten from flow 1, then one send each from flows 2 and
        // 3. Each seated send stalls, so its seat is taken back for the
        // next.
        for id in 10..20 {
            send(&seats, flow(1), LARGE + 1, id, &order);
        }
        send(&seats, flow(2), LARGE + 1, 2, &order);
        send(&seats, flow(3), LARGE + 1, 3, &order);
        let mut first = Vec::new();
        for _ in 0..4 {
            first.push(seated.recv().await.unwrap());
        }
        assert_eq!(
            first,
            [10, 2, 3, 11],
            "one of the storm, then the others' turn"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn one_client_from_many_addresses_is_one_flow() {
        let user = Some(Owner::Peer(IpAddr::from([10, 9, 9, 9])));
        let from = |n: u8| Flow::new(user, Some(IpAddr::from([10, 0, 1, n])));
        let seats = Arc::new(Seats::new(1));
        let (order, mut seated) = tokio::sync::mpsc::unbounded_channel();
        let _held = self::seated(&seats, flow(1)).await;
        // A storm of one client from ten addresses, then another client.
        for n in 0..10 {
            send(&seats, from(n), LARGE + 1, u32::from(n) + 10, &order);
        }
        send(&seats, flow(2), LARGE + 1, 2, &order);
        let first = [seated.recv().await.unwrap(), seated.recv().await.unwrap()];
        assert_eq!(
            first,
            [10, 2],
            "the other client's turn after one of the storm"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_smaller_send_is_seated_before_a_storm_of_larger_ones_and_takes_a_larger_ones_seat() {
        let seats = Arc::new(Seats::new(1));
        let (order, mut seated) = tokio::sync::mpsc::unbounded_channel();
        // A storm of 20,000-object sends from twenty clients: one seated
        // (it sends; it never stalls here), the others queued.
        let mut storm = seats
            .take(20_000, flow(100))
            .await
            .unwrap()
            .expect("a seat");
        for n in 0..20 {
            send(&seats, flow(n), 20_000, u32::from(n) + 10, &order);
        }
        tokio::task::yield_now().await;
        // A tenant's list of 1,596 objects.
        send(&seats, flow(200), 1_596, 1, &order);
        let first = tokio::time::timeout(STALL / 2, seated.recv()).await;
        assert_eq!(first, Ok(Some(1)), "at once, before every queued send");
        assert!(seated.try_recv().is_err());
        // The storm's seated send has lost its seat: it waits to go on.
        let resumed = tokio::time::timeout(STALL / 2, storm.ready()).await;
        assert!(resumed.is_err(), "no seat while the smaller one sends");
        assert_eq!(seats.0.state.lock().free, 0, "one seat, still");
    }

    #[tokio::test(start_paused = true)]
    async fn a_full_queue_and_a_long_wait_are_answered_429() {
        let seats = Arc::new(Seats::new(1));
        let held = seated(&seats, flow(1)).await;
        // The seat's holder progresses all the while.
        let _sending = tokio::spawn(async move {
            loop {
                tokio::time::sleep(STALL / 2).await;
                held.progressed();
            }
        });
        let (order, _seated) = tokio::sync::mpsc::unbounded_channel();
        for id in 0..QUEUE_LENGTH as u32 {
            send(&seats, flow(2), LARGE + 1, id, &order);
        }
        tokio::task::yield_now().await;
        let full = seats.take(LARGE + 1, flow(2)).await.err().expect("refused");
        let retry = full.details.as_ref().and_then(|d| d.retry_after_seconds);
        assert_eq!((full.code, retry), (429, Some(1)));
        assert!(full.message.contains("queued"), "{}", full.message);
        // Another flow queues, and is refused once it has waited too long.
        let waited = tokio::spawn({
            let seats = seats.clone();
            async move { seats.take(LARGE + 1, flow(3)).await.err() }
        });
        let status = waited.await.unwrap().expect("refused");
        assert_eq!(status.code, 429);
        assert!(status.message.contains("waited"), "{}", status.message);
        assert!(
            !seats
                .0
                .state
                .lock()
                .waiting
                .iter()
                .any(|w| w.flow == flow(3)),
            "the refused send left the queue"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_stalled_send_gives_its_seat_to_a_waiting_one_and_queues_again_when_it_resumes() {
        let seats = Arc::new(Seats::new(1));
        let mut sending = seated(&seats, flow(1)).await;
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
        sending.ready().await.unwrap();
        sending.progressed();
        drop(sending);
        let state = seats.0.state.lock();
        assert_eq!(state.free, 1, "every seat back");
        assert!(state.held.is_empty() && state.waiting.is_empty());
    }
}

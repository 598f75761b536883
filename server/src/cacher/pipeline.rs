//! Pipelined requests whose answer every asker waiting when it is sent
//! shares.
//!
//! A consistent read may only trust an answer to a request *sent after
//! the read arrived*. An ask joins the queue of its key; when fewer than
//! `max_in_flight` requests of that key are in flight, one is sent at once
//! for every ask queued, else the queue waits for the next slot that
//! frees. Under load an ask thus waits about one round trip, every request
//! serves a batch, and throughput is not bounded by one batch per round
//! trip.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Arc;

use futures::future::BoxFuture;
use parking_lot::Mutex;
use tokio::sync::oneshot;

/// Sends a request for the asks of one key.
pub(crate) type Request<T> = Arc<dyn Fn() -> BoxFuture<'static, T> + Send + Sync>;

/// Requests per key, at most `max_in_flight` of one key at once.
pub(crate) struct Pipeline<K, T> {
    max_in_flight: usize,
    queues: Mutex<HashMap<K, Queue<T>>>,
}

/// The asks of one key.
struct Queue<T> {
    /// Asks that came after the last request was sent.
    waiting: Vec<oneshot::Sender<T>>,
    /// Requests in flight.
    in_flight: usize,
}

impl<T> Queue<T> {
    /// The waiting asks, to send a request for, if a slot is free.
    fn take(&mut self, max_in_flight: usize) -> Option<Vec<oneshot::Sender<T>>> {
        if self.waiting.is_empty() || self.in_flight >= max_in_flight {
            return None;
        }
        self.in_flight += 1;
        Some(std::mem::take(&mut self.waiting))
    }
}

impl<K, T> Pipeline<K, T>
where
    K: Hash + Eq + Clone + Send + Sync + 'static,
    T: Clone + Send + 'static,
{
    /// At most `max_in_flight` requests of one key at once.
    pub(crate) fn new(max_in_flight: usize) -> Arc<Self> {
        Arc::new(Pipeline {
            max_in_flight: max_in_flight.max(1),
            queues: Mutex::default(),
        })
    }

    /// Asks for `key`: the answer of a request sent after this call, by
    /// `send` or by the `send` of an earlier ask of the same key (they
    /// must send the same request). Dropping the receiver withdraws the
    /// ask, not the request.
    pub(crate) fn ask(self: &Arc<Self>, key: K, send: Request<T>) -> oneshot::Receiver<T> {
        let (tx, rx) = oneshot::channel();
        let batch = {
            let mut queues = self.queues.lock();
            let queue = queues.entry(key.clone()).or_insert_with(|| Queue {
                waiting: Vec::new(),
                in_flight: 0,
            });
            queue.waiting.push(tx);
            queue.take(self.max_in_flight)
        };
        if let Some(batch) = batch {
            tokio::spawn(self.clone().run(key, batch, send));
        }
        rx
    }

    /// Sends for `batch`, then for the asks that queued meanwhile, while
    /// any do.
    async fn run(self: Arc<Self>, key: K, mut batch: Vec<oneshot::Sender<T>>, send: Request<T>) {
        loop {
            let answer = send().await;
            for ask in batch {
                let _ = ask.send(answer.clone());
            }
            let mut queues = self.queues.lock();
            let Some(queue) = queues.get_mut(&key) else {
                return;
            };
            queue.in_flight -= 1;
            match queue.take(self.max_in_flight) {
                Some(next) => batch = next,
                None => {
                    if queue.in_flight == 0 && queue.waiting.is_empty() {
                        queues.remove(&key);
                    }
                    return;
                }
            }
        }
    }
}

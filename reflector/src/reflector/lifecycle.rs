//! The reflector's lifecycle: one state type, the transitions next to it,
//! and [`Reflector::run`], the small loop that drives them.
//!
//! ```text
//!   Listing ──listed──▶ Watching ──ended (timeout)──▶ Watching
//!     ▲  │                 │  │
//!     │  └─failed─┐        │  └─broken, 429, 5xx─▶ BackingOff ─▶ Watching
//!     │           ▼        └─410, undecodable──────────────────▶ Listing
//!     │      BackingOff ─▶ Listing
//!     └─────── Failing ◀── 401, 403, 404, a panic (from any state)
//! ```

use std::panic::AssertUnwindSafe;
use std::time::{Duration, Instant};

use futures::FutureExt;

use super::strategies::{Failed, ListReason};
use super::{Phase, Recovery, Reflector, Strategy, UpstreamError, WatchEvents};

/// Where the reflector is. Each state is named for what is already true;
/// [`Reflector::step`] takes one step from it to the next.
pub(super) enum State {
    /// The store is not known to hold the current state: the step lists
    /// with the strategy. Holds: the store has the last list and the events
    /// after it (nothing before the first list), and its readiness is what
    /// it was: a relist keeps serving the last state.
    /// Listed → `Watching`; failed → `BackingOff` or `Failing`, then
    /// `Listing` again (or `Listing` at once with parallel lists: `auto`'s
    /// fallback).
    Listing {
        /// Why, for logs and the status document.
        reason: ListReason,
    },
    /// The store holds every change up to `rv`: the step follows `events`
    /// (the watch a parallel or streaming list left open) or a new watch
    /// from `rv`. With `confirm`, the store becomes ready once the watch
    /// proves to work (a classic list's watch may get 410 at once).
    /// Ended (its timeout) → `Watching` from where it got; failed →
    /// `Listing` (history lost), `BackingOff` (then `Watching` from `rv`)
    /// or `Failing`.
    Watching {
        /// The resourceVersion the store is complete up to.
        rv: u64,
        /// A watch already open at `rv`.
        events: Option<WatchEvents>,
        /// Mark the store ready once the watch works.
        confirm: bool,
    },
    /// A transient failure (429, 5xx, a broken stream, a failed list):
    /// waiting `delay` before `then`. The store keeps its readiness and
    /// serves its last state.
    BackingOff {
        /// How long.
        delay: Duration,
        /// `Listing` or `Watching`, with no watch open.
        then: Box<State>,
    },
    /// A persistent failure (401, 403, 404, a panic: the table's
    /// [`Recovery::Fail`]): the store is not ready (since the move here),
    /// with `error` as the reason, and the reflector lists again after
    /// `delay`. The first list
    /// that succeeds makes the store ready again.
    Failing {
        /// The failure, as `/readyz` shows it.
        error: String,
        /// How long before the next list.
        delay: Duration,
    },
}

impl State {
    /// Every state's name, as [`State::name`] gives it.
    const NAMES: [&'static str; 4] = ["listing", "watching", "backing_off", "failing"];

    /// The name in the status document and the `phase` label of
    /// `kubecache_reflector_phase`.
    fn name(&self) -> &'static str {
        match self {
            State::Listing { .. } => "listing",
            State::Watching { .. } => "watching",
            State::BackingOff { .. } => "backing_off",
            State::Failing { .. } => "failing",
        }
    }
}

impl Reflector {
    /// Runs until the future is dropped (which drops the store's writer,
    /// and so leaves the store closed and not ready).
    ///
    /// A panic inside a step (e.g. in the user's `ObjectFilter`) is caught
    /// here and failed like a 403: the store is not ready, with the panic's
    /// message, and the reflector relists into the same store after a
    /// backoff. Letting the task die instead would take one resource's bad
    /// filter or object out on every resource of the process (a restart
    /// would hit it again); caught, the others keep serving, and the
    /// resource recovers by itself if the object that triggered it changes.
    /// The store stays consistent: user code and decoding never run under
    /// its lock, and the relist's diff repairs what the interrupted step
    /// left unapplied.
    pub async fn run(mut self) {
        let mut state = match self.resume_at {
            Some(rv) => State::Watching {
                rv,
                events: None,
                confirm: true,
            },
            None => State::Listing {
                reason: ListReason::Initial,
            },
        };
        for name in State::NAMES {
            let now = if name == state.name() { 1.0 } else { 0.0 };
            metrics::gauge!("kubecache_reflector_phase", "resource" => self.name.clone(), "phase" => name).set(now);
        }
        self.status.send_modify(|s| s.phase = state.name());
        loop {
            let from = state.name();
            state = match AssertUnwindSafe(self.step(state)).catch_unwind().await {
                Ok(next) => next,
                Err(panic) => {
                    let message = panic
                        .downcast_ref::<&str>()
                        .map(|s| s.to_string())
                        .or_else(|| panic.downcast_ref::<String>().cloned())
                        .unwrap_or_else(|| "a panic without a message".into());
                    let phase = match from {
                        "watching" => Phase::Watch,
                        _ => Phase::List,
                    };
                    self.list_failed(Failed {
                        phase,
                        error: UpstreamError::Panicked(message),
                    })
                }
            };
            self.moved(from, &state);
        }
    }

    /// Publishes a change of state (status and metric).
    fn moved(&self, from: &'static str, to: &State) {
        let to = to.name();
        if from == to {
            return;
        }
        metrics::gauge!("kubecache_reflector_phase", "resource" => self.name.clone(), "phase" => from).set(0.0);
        metrics::gauge!("kubecache_reflector_phase", "resource" => self.name.clone(), "phase" => to).set(1.0);
        self.status.send_modify(|s| s.phase = to);
    }

    /// One step: does what `state` is for and says where it leads.
    async fn step(&mut self, state: State) -> State {
        match state {
            // Listing => (Watching, Listing, BackingOff or Failing)
            State::Listing { reason } => {
                let started = Instant::now();
                match self.list(&reason).await {
                    Ok(listed) => {
                        self.listed(&reason, started);
                        self.backoff.reset();
                        self.failure_said = None;
                        // Parallel and streaming lists already hold a working
                        // watch; a classic list's watch is only known to work
                        // once it delivers.
                        let confirm = listed.events.is_none();
                        if !confirm {
                            self.writer.set_ready();
                        }
                        State::Watching {
                            rv: listed.rv,
                            events: listed.events,
                            confirm,
                        }
                    }
                    Err(failed) => self.list_failed(failed),
                }
            }
            // Watching => (Watching, Listing, BackingOff or Failing)
            State::Watching {
                rv,
                events,
                confirm,
            } => self.watch(rv, events, confirm).await,
            // BackingOff => (Listing or Watching)
            State::BackingOff { delay, then } => {
                tokio::time::sleep(delay).await;
                *then
            }
            // Failing => (Listing)
            State::Failing { error, delay } => {
                tokio::time::sleep(delay).await;
                State::Listing {
                    reason: ListReason::Retry(error),
                }
            }
        }
    }

    /// Where a failed list (or a panic) leads, as the table says.
    fn list_failed(&mut self, Failed { phase, error }: Failed) -> State {
        let reason = ListReason::Retry(error.to_string());
        match self.failed(&error, phase) {
            Recovery::FallBack => {
                tracing::info!(resource = %self.name, %error, "the server has no streaming lists: using parallel list-watch");
                self.strategy = Strategy::Parallel;
                State::Listing { reason }
            }
            Recovery::Fail => self.failing(&error),
            Recovery::Backoff(floor) => self.backing_off(floor, State::Listing { reason }),
            // A failed list made no progress: the next one waits as well.
            Recovery::Relist | Recovery::Resume => {
                self.backing_off(None, State::Listing { reason })
            }
        }
    }

    /// Waits for the next backoff delay (at least `floor`), then `then`.
    pub(super) fn backing_off(&mut self, floor: Option<Duration>, then: State) -> State {
        State::BackingOff {
            delay: self.backoff.next(floor),
            then: Box::new(then),
        }
    }

    /// Fails the resource with `error` until a list succeeds: marks the
    /// store not ready before the state is published, so that whoever sees
    /// `failing` sees the reason too.
    pub(super) fn failing(&mut self, error: &UpstreamError) -> State {
        let said = error.to_string();
        if self.failure_said.as_ref() == Some(&said) {
            tracing::debug!(resource = %self.name, %error, "still not ready: retrying");
        } else {
            tracing::error!(resource = %self.name, %error, "not ready until this is fixed: retrying");
            self.failure_said = Some(said);
        }
        self.writer.set_not_ready(&error.to_string());
        State::Failing {
            error: error.to_string(),
            delay: self.backoff.next(None),
        }
    }
}

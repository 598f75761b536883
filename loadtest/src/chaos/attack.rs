//! The hostile clients at work: each kind's clients as tasks, and what
//! each kind met, tallied, once stopped. The kinds are started by
//! `hostile` (HTTP/1) and `hostile_h2` (HTTP/2).

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::Serialize;
use tokio::task::JoinSet;

use super::victim::{Tally, Victim};

/// What one kind of hostile client met.
#[derive(Debug, Clone, Serialize)]
pub struct HostileReport {
    /// The kind.
    pub kind: &'static str,
    /// Clients of that kind.
    pub clients: usize,
    /// How many times each outcome happened (status codes, cuts, errors).
    pub outcomes: BTreeMap<String, u64>,
}

/// The hostile clients at work.
#[derive(Default)]
pub struct Attack {
    tasks: JoinSet<()>,
    tallies: Vec<(&'static str, usize, Arc<Tally>)>,
}

impl Attack {
    /// Starts `clients` clients of `kind`, each its task.
    pub(super) fn spawn<F, Fut>(
        &mut self,
        kind: &'static str,
        clients: usize,
        victim: &Arc<Victim>,
        client: F,
    ) where
        F: Fn(Arc<Victim>, Arc<Tally>, u64) -> Fut,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let tally = Arc::new(Tally::default());
        let victim = Arc::new(victim.kind(self.tallies.len()));
        for i in 0..clients {
            self.tasks
                .spawn(client(victim.clone(), tally.clone(), i as u64));
        }
        self.tallies.push((kind, clients, tally));
    }

    /// Counts `kind`'s clients as having met `outcome`, none started.
    pub(super) fn not_run(&mut self, kind: &'static str, clients: usize, outcome: &str) {
        let tally = Arc::new(Tally::default());
        tally.note(outcome);
        self.tallies.push((kind, clients, tally));
    }

    /// Stops every hostile client: what each kind met.
    pub fn stop(mut self) -> Vec<HostileReport> {
        self.tasks.abort_all();
        self.tallies
            .into_iter()
            .filter(|(_, clients, _)| *clients > 0)
            .map(|(kind, clients, tally)| HostileReport {
                kind,
                clients,
                outcomes: tally.take(),
            })
            .collect()
    }
}

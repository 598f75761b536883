//! Sharded watchers (KEP-5866's `shardSelector`): `shardReplicas` replicas
//! of each of `shards` equal ranges of the hash space, as a horizontally
//! scaled controller runs them, beside unsharded watchers to compare bytes
//! with.
//!
//! Each replica is an ordinary watcher, so the per-watcher check holds for
//! it: exactly the events of the objects in its range, in order. [`check`]
//! adds what only the shards together can show: for each replica index,
//! the union of the shards' streams is the unsharded stream (every event
//! of the API server's history in exactly one shard), and every object's
//! events come in one shard only. Objects are told apart by uid (a pod
//! deleted and created again under its name is another object, hashed
//! anew).
//!
//! Ranges are matched with the sim's own selector parser, not kubecache's:
//! the check must not share a misreading with what it checks.

use std::collections::{BTreeMap, HashMap};
use std::fmt;

use serde::Serialize;

use super::Scenario;
use super::filter::{Shard, ShardBy, WatchFilter};
use super::watchers::{ReferenceEvent, WatchResult};

/// The watchers the scenario's sharding adds: one unsharded watcher to
/// compare with, then every replica of every shard (none without shards).
pub(super) fn filters(scenario: &Scenario) -> Vec<WatchFilter> {
    if scenario.shards == 0 {
        return Vec::new();
    }
    let replicas = (0..scenario.shard_replicas).flat_map(|replica| {
        (0..scenario.shards).map(move |index| {
            WatchFilter::Shard(Shard::new(
                scenario.shard_by,
                index,
                scenario.shards,
                replica,
            ))
        })
    });
    std::iter::once(WatchFilter::All).chain(replicas).collect()
}

/// The shards' results beside the unsharded watchers'.
#[derive(Debug, Clone, Serialize)]
pub struct ShardingReport {
    /// What the shards hash.
    pub by: ShardBy,
    /// Events an unsharded watcher received (the mean of them).
    pub unsharded_events: u64,
    /// Bytes an unsharded watcher received (the mean of them).
    pub unsharded_bytes: u64,
    /// Shard by shard.
    pub shards: Vec<ShardRow>,
}

/// One shard's replicas.
#[derive(Debug, Clone, Serialize)]
pub struct ShardRow {
    /// Its `shardSelector`.
    pub selector: String,
    /// Its replicas.
    pub replicas: usize,
    /// Events a replica received (the mean of them).
    pub events: u64,
    /// Bytes a replica received (the mean of them).
    pub bytes: u64,
}

impl fmt::Display for ShardingReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "shards of {} (together the unsharded stream, each object in one shard): \
             an unsharded watcher received {} events, {:.2} MB",
            self.by.path(),
            self.unsharded_events,
            self.unsharded_bytes as f64 / 1e6
        )?;
        writeln!(
            f,
            "{:<6} {:>8} {:>14} {:>11} {:>12}  selector",
            "shard", "replicas", "events/replica", "MB/replica", "x unsharded"
        )?;
        for (i, row) in self.shards.iter().enumerate() {
            writeln!(
                f,
                "{i:<6} {:>8} {:>14} {:>11.2} {:>12.3}  {}",
                row.replicas,
                row.events,
                row.bytes as f64 / 1e6,
                row.bytes as f64 / self.unsharded_bytes.max(1) as f64,
                row.selector
            )?;
        }
        Ok(())
    }
}

/// Checks that, for each replica index, the shards together received the
/// `checked` history (events after `cutoff` left out) once, each object in
/// one shard; a failure for each fault. The report, when the run has
/// shards.
pub(super) fn check(
    by: ShardBy,
    checked: &[&ReferenceEvent],
    cutoff: u64,
    watchers: &[WatchResult],
    failures: &mut Vec<String>,
) -> Option<ShardingReport> {
    let sharded: Vec<(&Shard, &WatchResult)> = watchers
        .iter()
        .filter_map(|w| match &w.filter {
            WatchFilter::Shard(shard) => Some((shard, w)),
            _ => None,
        })
        .collect();
    if sharded.is_empty() {
        return None;
    }
    let mut replicas: BTreeMap<usize, Vec<(&Shard, &WatchResult)>> = BTreeMap::new();
    for (shard, result) in &sharded {
        replicas
            .entry(shard.replica)
            .or_default()
            .push((shard, result));
    }
    for (replica, shards) in replicas {
        if let Err(why) = union_is_history(&shards, checked, cutoff) {
            failures.push(format!("replica {replica} of the shards: {why}"));
        }
    }
    let unsharded: Vec<&WatchResult> = watchers
        .iter()
        .filter(|w| w.filter == WatchFilter::All)
        .collect();
    let mut rows: BTreeMap<usize, (&str, Vec<&WatchResult>)> = BTreeMap::new();
    for (shard, result) in &sharded {
        rows.entry(shard.index)
            .or_insert_with(|| (&shard.selector, Vec::new()))
            .1
            .push(result);
    }
    Some(ShardingReport {
        by,
        unsharded_events: mean(&unsharded, |w| w.events.len() as u64),
        unsharded_bytes: mean(&unsharded, |w| w.bytes),
        shards: rows
            .into_values()
            .map(|(selector, results)| ShardRow {
                selector: selector.into(),
                replicas: results.len(),
                events: mean(&results, |w| w.events.len() as u64),
                bytes: mean(&results, |w| w.bytes),
            })
            .collect(),
    })
}

/// Whether one replica of every shard received, together, each `checked`
/// event exactly once, every object's in one shard.
fn union_is_history(
    shards: &[(&Shard, &WatchResult)],
    checked: &[&ReferenceEvent],
    cutoff: u64,
) -> Result<(), String> {
    let mut shard_of_event: HashMap<u64, usize> = HashMap::new();
    for (shard, result) in shards {
        for (rv, _) in result.events.iter().filter(|(rv, _)| *rv <= cutoff) {
            if let Some(other) = shard_of_event.insert(*rv, shard.index) {
                return Err(format!(
                    "the event at {rv} in shards {other} and {}",
                    shard.index
                ));
            }
        }
    }
    let mut shard_of_object: HashMap<&str, usize> = HashMap::new();
    for event in checked {
        let Some(&shard) = shard_of_event.get(&event.rv) else {
            return Err(format!("the event at {} in no shard", event.rv));
        };
        let uid = event.after.uid.as_str();
        let owner = *shard_of_object.entry(uid).or_insert(shard);
        if owner != shard {
            return Err(format!("object {uid} in shards {owner} and {shard}"));
        }
    }
    if shard_of_event.len() != checked.len() {
        return Err(format!(
            "{} events in the shards, {} in the API server's history",
            shard_of_event.len(),
            checked.len()
        ));
    }
    Ok(())
}

fn mean(results: &[&WatchResult], of: impl Fn(&WatchResult) -> u64) -> u64 {
    let total: u64 = results.iter().map(|w| of(w)).sum();
    total / results.len().max(1) as u64
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Instant;

    use super::*;
    use crate::run::targets::ObjectFacts;

    /// `events` of uid `u{n}` at resourceVersion `rv`.
    fn history(events: &[(u64, u32)]) -> Vec<ReferenceEvent> {
        events
            .iter()
            .map(|&(rv, n)| ReferenceEvent {
                rv,
                before: None,
                after: Arc::new(ObjectFacts {
                    uid: format!("u{n}"),
                    ..ObjectFacts::default()
                }),
            })
            .collect()
    }

    fn received(index: usize, rvs: &[u64]) -> (Shard, WatchResult) {
        let shard = Shard::new(ShardBy::Uid, index, 2, 0);
        let result = WatchResult {
            events: rvs.iter().map(|rv| (*rv, Instant::now())).collect(),
            ..WatchResult::new(WatchFilter::Shard(shard.clone()), None)
        };
        (shard, result)
    }

    fn union(shards: &[(Shard, WatchResult)], history: &[ReferenceEvent]) -> Result<(), String> {
        let shards: Vec<(&Shard, &WatchResult)> = shards.iter().map(|(s, r)| (s, r)).collect();
        let checked: Vec<&ReferenceEvent> = history.iter().collect();
        union_is_history(&shards, &checked, 10)
    }

    #[test]
    fn the_shards_union_must_be_the_history_each_event_and_object_in_one_shard() {
        let history = history(&[(1, 1), (2, 2), (3, 1), (4, 3)]);
        let good = [received(0, &[1, 3]), received(1, &[2, 4, 11])];
        assert_eq!(union(&good, &history), Ok(()));
        let twice = [received(0, &[1, 2, 3]), received(1, &[2, 4])];
        assert_eq!(
            union(&twice, &history),
            Err("the event at 2 in shards 0 and 1".into())
        );
        let lost = [received(0, &[1, 3]), received(1, &[2])];
        assert_eq!(
            union(&lost, &history),
            Err("the event at 4 in no shard".into())
        );
        let split = [received(0, &[1]), received(1, &[2, 3, 4])];
        assert_eq!(
            union(&split, &history),
            Err("object u1 in shards 0 and 1".into())
        );
        let extra = [received(0, &[1, 3, 5]), received(1, &[2, 4])];
        assert!(union(&extra, &history).unwrap_err().contains("5 events"));
    }

    #[test]
    fn equal_ranges_cover_the_hash_space_once_up_to_two_to_the_64() {
        let shards: Vec<Shard> = (0..3).map(|i| Shard::new(ShardBy::Uid, i, 3, 0)).collect();
        assert_eq!(
            shards[0].selector,
            "shardRange(object.metadata.uid, '0x0000000000000000', '0x5555555555555555')"
        );
        assert!(
            shards[2]
                .selector
                .ends_with("'0xaaaaaaaaaaaaaaaa', '0x10000000000000000')")
        );
        for uid in ["a", "b", "c", "d", "e", "f"] {
            let object = ObjectFacts {
                uid: uid.into(),
                ..ObjectFacts::default()
            };
            let owners = shards.iter().filter(|s| s.matches(&object)).count();
            assert_eq!(owners, 1, "{uid}");
        }
    }
}

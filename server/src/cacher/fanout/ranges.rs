//! Watchers filed by the hash ranges of their shard selectors, so that an
//! event is offered only to the watchers whose ranges contain its hash.
//!
//! The hash space is cut at every bound of every filed range into
//! segments; each segment lists the watchers whose ranges cover it. An
//! event's watchers are one segment's, found by one search: with 1,000
//! watchers in 10 shards, an event meets the 100 of its shard, not the
//! 1,000. Filing and unfiling a range touch the segments it covers.

use std::collections::BTreeMap;

use kubecache_wire::ShardRange;

/// Watcher ids by hash range.
#[derive(Debug)]
pub(super) struct RangeIndex {
    /// Segments by their first hash; each runs to the next one's start (the
    /// last to 2^64). The segment at 0 is always there.
    segments: BTreeMap<u64, Segment>,
    /// Ranges filed.
    filed: usize,
}

#[derive(Debug, Default, Clone)]
struct Segment {
    /// Filed ranges that start or end at this segment's first hash: when
    /// none is left, the segment is the same as the one before and merges
    /// into it.
    bounds: usize,
    /// The watchers whose ranges cover the segment (a watcher with two
    /// overlapping ranges is here twice).
    ids: Vec<usize>,
}

impl Default for RangeIndex {
    fn default() -> Self {
        RangeIndex {
            segments: BTreeMap::from([(0, Segment::default())]),
            filed: 0,
        }
    }
}

impl RangeIndex {
    /// Whether no range is filed.
    pub(super) fn is_empty(&self) -> bool {
        self.filed == 0
    }

    /// Files watcher `id` under `range`.
    pub(super) fn add(&mut self, range: ShardRange, id: usize) {
        let start = range.start();
        self.bound(start, 1);
        if let Ok(end) = u64::try_from(range.end()) {
            self.bound(end, 1);
        }
        for (_, segment) in self.covered(range) {
            segment.ids.push(id);
        }
        self.filed += 1;
    }

    /// Takes watcher `id` out from under `range` (filed by [`Self::add`]).
    pub(super) fn remove(&mut self, range: ShardRange, id: usize) {
        for (_, segment) in self.covered(range) {
            if let Some(at) = segment.ids.iter().position(|&i| i == id) {
                segment.ids.swap_remove(at);
            }
        }
        self.bound(range.start(), -1);
        if let Ok(end) = u64::try_from(range.end()) {
            self.bound(end, -1);
        }
        self.filed -= 1;
    }

    /// The watchers whose ranges contain `hash`.
    pub(super) fn find(&self, hash: u64) -> &[usize] {
        self.segments
            .range(..=hash)
            .next_back()
            .map_or(&[], |(_, segment)| &segment.ids)
    }

    /// The segments inside `range`.
    fn covered(&mut self, range: ShardRange) -> impl Iterator<Item = (&u64, &mut Segment)> {
        let end = range.end();
        self.segments
            .range_mut(range.start()..)
            .take_while(move |(start, _)| u128::from(**start) < end)
    }

    /// Counts one more (`+1`) or one fewer (`-1`) range bound at `at`:
    /// splits the segment holding `at` there first, or merges the segment
    /// at `at` into the one before when its last bound goes.
    fn bound(&mut self, at: u64, change: isize) {
        if !self.segments.contains_key(&at) {
            let before = self.find_segment(at).clone();
            self.segments.insert(
                at,
                Segment {
                    bounds: 0,
                    ids: before.ids,
                },
            );
        }
        let segment = self.segments.get_mut(&at).expect("split above");
        segment.bounds = segment.bounds.saturating_add_signed(change);
        if segment.bounds == 0 && at != 0 {
            self.segments.remove(&at);
        }
    }

    fn find_segment(&self, hash: u64) -> &Segment {
        self.segments
            .range(..=hash)
            .next_back()
            .map(|(_, segment)| segment)
            .expect("the segment at 0 is always there")
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn sorted(ids: &[usize]) -> Vec<usize> {
        let mut ids = ids.to_vec();
        ids.sort_unstable();
        ids.dedup();
        ids
    }

    proptest! {
        /// Whatever is filed and unfiled, a hash finds exactly the watchers
        /// whose live ranges contain it, and an empty index is one segment.
        #[test]
        fn a_hash_finds_exactly_the_watchers_whose_ranges_contain_it(
            ranges in prop::collection::vec((any::<u64>(), any::<u64>(), any::<bool>()), 1..24),
            removed in prop::collection::vec(any::<bool>(), 24),
            probes in prop::collection::vec(any::<u64>(), 16),
        ) {
            let ranges: Vec<ShardRange> = ranges
                .into_iter()
                .map(|(a, b, top)| {
                    let end = if top { 1 << 64 } else { u128::from(a.max(b)) };
                    ShardRange::new(a.min(b), end)
                        .unwrap_or(ShardRange::new(a.min(b), 1 << 64).unwrap())
                })
                .collect();
            let mut index = RangeIndex::default();
            for (id, range) in ranges.iter().enumerate() {
                index.add(*range, id);
            }
            let live: Vec<(usize, ShardRange)> = ranges
                .iter()
                .enumerate()
                .filter(|(id, range)| {
                    if removed[*id] {
                        index.remove(**range, *id);
                    }
                    !removed[*id]
                })
                .map(|(id, range)| (id, *range))
                .collect();
            let bounds = live.iter().flat_map(|(_, r)| [r.start(), r.start().wrapping_sub(1)]);
            for hash in probes.into_iter().chain(bounds).chain([0, u64::MAX]) {
                let want: Vec<usize> = live
                    .iter()
                    .filter(|(_, range)| range.contains(hash))
                    .map(|(id, _)| *id)
                    .collect();
                prop_assert_eq!(sorted(index.find(hash)), want);
            }
            for (id, range) in &live {
                index.remove(*range, *id);
            }
            prop_assert!(index.is_empty());
            prop_assert_eq!(index.segments.len(), 1);
        }
    }
}

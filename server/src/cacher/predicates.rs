//! Server-side change predicates: controller-runtime's
//! `GenerationChangedPredicate`, `LabelChangedPredicate` and
//! `AnnotationChangedPredicate`, applied once in kubecache instead of in
//! every operator.
//!
//! A watch that asks for predicates gets `ADDED` and `DELETED` events always
//! and a `MODIFIED` event only when one of the chosen parts changed. Its
//! copy of everything else (status above all) goes stale by design: that is
//! the point, a status-only update reaches nobody who asked not to see it.

use kubecache_wire::{CachedObject, Status};

/// Which changes make a `MODIFIED` event worth delivering. The default
/// (nothing chosen) delivers every event.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Predicates {
    /// `metadata.generation` changed (spec changes, for kinds that keep one).
    pub generation: bool,
    /// `metadata.labels` changed.
    pub labels: bool,
    /// `metadata.annotations` changed.
    pub annotations: bool,
}

impl Predicates {
    /// Parses a comma-separated list of `generation`, `labels`,
    /// `annotations` (the `predicates` query parameter and the
    /// `/predicates/{list}/` URL prefix).
    pub fn parse(list: &str) -> Result<Self, Status> {
        let mut predicates = Predicates::default();
        for name in list.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            match name {
                "generation" => predicates.generation = true,
                "labels" => predicates.labels = true,
                "annotations" => predicates.annotations = true,
                other => {
                    return Err(Status::bad_request(format!(
                        "unknown change predicate {other:?}: supported predicates are \"generation\", \"labels\" and \"annotations\""
                    )));
                }
            }
        }
        Ok(predicates)
    }

    /// `true` when no predicate is chosen: every event passes.
    pub fn is_empty(&self) -> bool {
        *self == Predicates::default()
    }

    /// Whether a change from `previous` to `current` passes (a missing
    /// `previous` is an addition, which always passes).
    pub fn passes(&self, previous: Option<&CachedObject>, current: &CachedObject) -> bool {
        let Some(previous) = previous else {
            return true;
        };
        self.is_empty()
            || (self.generation && previous.generation != current.generation)
            || (self.labels && previous.labels != current.labels)
            || (self.annotations && previous.annotations_hash != current.annotations_hash)
    }

    /// Merges two sets (query parameter and URL prefix together).
    pub fn union(self, other: Predicates) -> Predicates {
        Predicates {
            generation: self.generation || other.generation,
            labels: self.labels || other.labels,
            annotations: self.annotations || other.annotations,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_predicates_are_refused_with_the_supported_list() {
        let status = Predicates::parse("generation,status").unwrap_err();
        assert_eq!(status.code, 400);
        assert!(status.message.contains("\"status\""), "{}", status.message);
        let parsed = Predicates::parse("generation, labels").unwrap();
        assert!(parsed.generation && parsed.labels && !parsed.annotations);
        assert!(Predicates::parse("").unwrap().is_empty());
    }
}

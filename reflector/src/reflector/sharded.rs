//! The sharded list: page 1, then the rest of the collection read as
//! namespaces at page 1's exact snapshot, several at once.
//!
//! Kubernetes lists have no key-range query, so the shards are namespaces:
//! objects are kept in key order (`namespace/name`), page 1 stops inside
//! some namespace N0, and the rest of the list is the rest of N0 (page 1's
//! continue token, which is at page 1's snapshot RV0, followed until the
//! objects leave N0) and every namespace whose objects sort after N0's,
//! each read from its own collection (`/api/v1/namespaces/{ns}/pods`) with
//! `resourceVersion=RV0&resourceVersionMatch=Exact`. The namespaces come
//! from a list of namespaces at RV0 too: the revision is global, and no
//! object exists in a namespace that does not (admission refuses it, and a
//! namespace is only removed once empty), so the shards cover exactly the
//! objects of RV0 a sequential list would have returned.
//!
//! The shards are a queue of namespaces pulled by `listShards` workers, each
//! with one page request under way at a time (its next page requested
//! before the page is decoded, as every paginated list does): the queue
//! balances namespaces of very different sizes by itself, where fixed
//! groups of namespaces would wait for their largest (and a request names
//! one namespace either way). Pages are decoded one at a time, in the
//! reflector's task, into one listing: the order of the objects does not
//! matter, as [`Listing::finish`] applies them by resourceVersion.
//!
//! Meanwhile the watch opened at RV0 is read into the buffer, as with
//! `parallel`. A shard answered 410 (RV0 compacted while the list ran) is
//! read again at the current state: its continue token's successor when
//! the 410 carries one, else its namespace from the start, without
//! resourceVersion. That is safe for the reason `parallel` resumes an
//! expired continue token: the watch opened at RV0 covers every change
//! since, the buffer replays them over the newer state the shard shows,
//! and the store's skip rule drops what the shard already had.
//!
//! Falls back to `parallel` (and says why, once per list) for a
//! cluster-scoped resource, a cache of one namespace, or when the
//! namespaces cannot be listed (403, or already compacted).

use futures::StreamExt;
use futures::stream::FuturesUnordered;

use super::replace::Listing;
use super::strategies::{Buffered, Failed, Fetch, Listed, Pages, fetched};
use super::{Phase, Query, Reflector, UpstreamError};

impl Reflector {
    /// Page 1, then the rest as shards at its snapshot (see the module).
    pub(super) async fn list_sharded(&mut self) -> Result<Listed, Failed> {
        let spec = self.upstream.spec();
        let unsharded = if !spec.resource.namespaced {
            Some("the resource is cluster-scoped".to_owned())
        } else if spec.namespace.is_some() {
            Some("the cache is of one namespace".to_owned())
        } else {
            None
        };
        let mut listing = Listing::default();
        let Some(next) = self.first_page(&mut listing).await? else {
            let rv = listing.finish(&mut self.writer, Vec::new());
            return Ok(Listed { rv, events: None });
        };
        let mut watch = self.buffer_watch(&listing).await?;
        let shards = match (unsharded, listing.last.clone()) {
            (Some(why), _) => Err(why),
            (None, None) => Err("page 1 was empty".to_owned()),
            (None, Some(last)) => {
                let snapshot = listing.snapshot.expect("a page sets the snapshot");
                let first = last.namespace().to_owned();
                match self
                    .buffering(&mut watch, self.namespaces_after(snapshot, &first))
                    .await?
                {
                    Ok(namespaces) => Ok((first, namespaces)),
                    Err(
                        error @ (UpstreamError::Gone { .. }
                        | UpstreamError::Client { code: 403, .. }),
                    ) => Err(format!("the namespaces cannot be listed: {error}")),
                    Err(error) => {
                        return Err(Failed {
                            phase: Phase::List,
                            error,
                        });
                    }
                }
            }
        };
        match shards {
            Ok((first, namespaces)) => {
                self.read_shards(&mut listing, &mut watch, next, first, namespaces)
                    .await?;
            }
            Err(why) => {
                tracing::info!(resource = %self.name, %why, "sharded list: listing the rest as parallel does");
                self.rest_of_pages(&mut listing, next, &mut watch).await?;
            }
        }
        self.finish_buffered(listing, watch).await
    }

    /// The namespaces at `snapshot` whose objects sort after those of
    /// `namespace`, in key order.
    async fn namespaces_after(
        &self,
        snapshot: u64,
        namespace: &str,
    ) -> Result<Vec<String>, UpstreamError> {
        let upstream = self.upstream.namespaces();
        let mut names = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let query = Query {
                limit: Some(self.config.page_size),
                continue_token: token.as_deref(),
                resource_version: token.is_none().then_some(snapshot),
                version_match: token.is_none().then_some("Exact"),
                ..Query::default()
            };
            let body = upstream.list(&query).await?;
            let page = body.page()?;
            page.for_each_json(|item| {
                let object = kubecache_wire::decode_object(
                    item,
                    "Namespace",
                    "v1",
                    &kubecache_wire::Transform::default(),
                )
                .map_err(|e| UpstreamError::Decode {
                    what: "Namespace object".into(),
                    error: e.to_string(),
                })?;
                names.push(format!("{}/", object.key.name()));
                Ok(())
            })?;
            match page.continue_token.filter(|t| !t.is_empty()) {
                Some(next) => token = Some(next),
                None => break,
            }
        }
        // Objects sort by `namespace/name`: `a-b/x` before `a/x`.
        let after = format!("{namespace}/");
        names.retain(|prefix| *prefix > after);
        names.sort_unstable();
        Ok(names
            .into_iter()
            .map(|mut prefix| {
                prefix.pop();
                prefix
            })
            .collect())
    }

    /// Reads the rest of namespace `first` from `next` (page 2) and the
    /// `namespaces` after it, at most `listShards` at once.
    async fn read_shards(
        &self,
        listing: &mut Listing,
        watch: &mut Buffered,
        next: Fetch,
        first: String,
        namespaces: Vec<String>,
    ) -> Result<(), Failed> {
        let snapshot = listing.snapshot.expect("a page sets the snapshot");
        let mut queue = namespaces.into_iter();
        let mut in_flight = FuturesUnordered::new();
        in_flight.push(shard_page(Pages::RestOf(first), next, true));
        let start = |namespace: String| {
            let upstream = self.upstream.in_namespace(&namespace);
            let fetch = self.fetch_from(&upstream, Some(snapshot), None);
            shard_page(Pages::Namespace(Box::new(upstream)), fetch, false)
        };
        while in_flight.len() < self.config.list_shards.max(1)
            && let Some(namespace) = queue.next()
        {
            in_flight.push(start(namespace));
        }
        while let Some((pages, continued, body)) = self.buffering(watch, in_flight.next()).await? {
            let next = match (body, &pages) {
                (Ok(body), _) => self
                    .page(listing, body, &pages)
                    .await
                    .map_err(Failed::at(Phase::List))?,
                // The snapshot was compacted before the shard's first page.
                (
                    Err(UpstreamError::Gone {
                        continue_token: None,
                        ..
                    }),
                    Pages::Namespace(upstream),
                ) if !continued => {
                    self.shard_done("gone");
                    self.resumed_after_gone();
                    tracing::info!(resource = %self.name, namespace = ?upstream.spec().namespace, "snapshot compacted: reading the shard at the current revision, the watch covers the difference");
                    Some(self.fetch_from(upstream, None, None))
                }
                (Err(error), _) => self.continue_expired(error, &pages)?,
            };
            watch.gauge(self);
            match next {
                Some(fetch) => in_flight.push(shard_page(pages, fetch, true)),
                None => {
                    self.shard_done("read");
                    if let Some(namespace) = queue.next() {
                        in_flight.push(start(namespace));
                    }
                }
            }
        }
        Ok(())
    }

    fn shard_done(&self, result: &'static str) {
        metrics::counter!("kubecache_upstream_list_shards_total", "resource" => self.name.clone(), "result" => result)
            .increment(1);
    }
}

/// A shard's page under way: the shard, whether the page continues a read
/// of it, and the body.
async fn shard_page(
    pages: Pages,
    fetch: Fetch,
    continued: bool,
) -> (Pages, bool, Result<super::ListResponse, UpstreamError>) {
    (pages, continued, fetched(fetch).await)
}

//! Reads at a resourceVersion the store has not reached yet: lists (`N`
//! with `NotOlderThan`, or without a limit) and streaming lists wait for it
//! as the watch cache does, then answer "Too large resource version".

use std::time::Duration;

use kubecache_wire::Status;

use super::Context;

/// How long a read waits for a resourceVersion the store has not reached,
/// as the watch cache does before answering "Too large resource version".
const FRESHNESS_WAIT: Duration = Duration::from_secs(3);

/// Waits until the store reaches `rv`; the revision to serve at.
pub async fn wait_for(ctx: &Context, rv: u64) -> Result<u64, Status> {
    let mut revisions = ctx.store.subscribe();
    let reached = tokio::time::timeout(FRESHNESS_WAIT, revisions.wait_for(|r| *r >= rv)).await;
    match reached {
        Ok(Ok(_)) => Ok(ctx.store.revision()),
        _ => Err(Status::too_large_resource_version(rv, ctx.store.revision())),
    }
}

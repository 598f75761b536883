//! Condition waits: a test waits for what it needs to have happened, never
//! for a span of time. A wait polls its condition on tokio's clock and
//! fails the test, naming what it waited for, only when the condition has
//! not come after [`PATIENCE`], a bound far beyond a loaded machine's
//! slowest, so a slow machine cannot fail it.

use std::time::Duration;

/// The longest a condition may take to come before the test fails.
pub const PATIENCE: Duration = Duration::from_secs(120);

/// How often a condition is polled.
const POLL: Duration = Duration::from_millis(10);

/// Waits until `condition` holds; fails the test naming `what` after
/// [`PATIENCE`].
pub async fn until(what: &str, mut condition: impl FnMut() -> bool) {
    until_async(what, async || condition()).await;
}

/// [`until`] with a condition that awaits (a request, a lock).
pub async fn until_async(what: &str, condition: impl AsyncFnMut() -> bool) {
    until_explained(what, condition, String::new).await;
}

/// [`until_async`], failing with `context()` (a process's output, the
/// state seen) after the name.
pub async fn until_explained(
    what: &str,
    mut condition: impl AsyncFnMut() -> bool,
    context: impl FnOnce() -> String,
) {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while !condition().await {
        if tokio::time::Instant::now() >= deadline {
            panic!("{what}: not within {PATIENCE:?}\n{}", context());
        }
        tokio::time::sleep(POLL).await;
    }
}

/// `future`'s output; fails the test naming `what` if it has not come
/// after [`PATIENCE`].
pub async fn within<T>(what: &str, future: impl Future<Output = T>) -> T {
    tokio::time::timeout(PATIENCE, future)
        .await
        .unwrap_or_else(|_| panic!("{what}: not within {PATIENCE:?}"))
}

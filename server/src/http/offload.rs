//! CPU-heavy request work, off the async workers.
//!
//! Selecting from a large store and rendering a Table take from
//! milliseconds to seconds of CPU. On an async worker thread that would
//! stall every other connection the worker serves: `/healthz`, GETs, watch
//! delivery. Such work runs on tokio's blocking threads instead, at most
//! one per core at once (more would only slice the same cores finer and
//! keep the workers waiting longer); the rest wait for a turn without
//! holding a thread. Light work stays where it is: a blocking thread's
//! round trip costs more than it.

use std::num::NonZero;
use std::sync::LazyLock;

use tokio::sync::Semaphore;

/// Objects examined from which a request is heavy (about a millisecond of
/// selector matching).
const HEAVY_EXAMINED: usize = 5_000;

/// Table rows from which a request is heavy (each row reads its object's
/// JSON).
const HEAVY_ROWS: usize = 100;

/// What a request costs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Work {
    /// Objects examined against its selectors.
    pub examined: usize,
    /// Table rows rendered.
    pub rendered: usize,
}

/// Whether `work` is heavy enough to run off the async workers.
pub(crate) fn is_heavy(work: Work) -> bool {
    work.examined >= HEAVY_EXAMINED || work.rendered >= HEAVY_ROWS
}

/// One turn per core, shared by the whole process.
static TURNS: LazyLock<Semaphore> =
    LazyLock::new(|| Semaphore::new(std::thread::available_parallelism().map_or(1, NonZero::get)));

/// Runs `work` on a blocking thread once a turn is free; its panic is this
/// task's.
pub(crate) async fn run<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> T {
    let _turn = TURNS
        .acquire()
        .await
        .expect("the semaphore is never closed");
    metrics::counter!("kubecache_offloaded_requests_total").increment(1);
    match tokio::task::spawn_blocking(work).await {
        Ok(answer) => answer,
        Err(error) => match error.try_into_panic() {
            Ok(panic) => std::panic::resume_unwind(panic),
            Err(error) => panic!("heavy work cancelled: {error}"),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "current_thread")]
    async fn heavy_work_leaves_the_async_thread_free() {
        let (release, released) = std::sync::mpsc::channel::<()>();
        let heavy = tokio::spawn(run(move || released.recv().unwrap()));
        // The only async thread runs other tasks while the work blocks; were
        // the work on it, this would never complete.
        let light = tokio::spawn(async { 42 });
        tokio::task::yield_now().await;
        assert_eq!(light.await.unwrap(), 42);
        assert!(!heavy.is_finished());
        release.send(()).unwrap();
        heavy.await.unwrap();
    }

    #[tokio::test]
    async fn a_panic_in_heavy_work_is_the_caller_s() {
        let caught = tokio::spawn(run(|| panic!("boom"))).await.unwrap_err();
        assert!(caught.is_panic());
    }

    #[test]
    fn heavy_is_many_objects_examined_or_many_rows_rendered() {
        let work = |examined, rendered| Work { examined, rendered };
        assert!(!is_heavy(work(HEAVY_EXAMINED - 1, HEAVY_ROWS - 1)));
        assert!(is_heavy(work(HEAVY_EXAMINED, 0)));
        assert!(is_heavy(work(0, HEAVY_ROWS)));
    }
}

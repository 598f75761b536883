//! A bound on pass-through's connections to the API server: a connection
//! holds a permit from its opening to its close, and one more waits for a
//! permit (or for an idle pooled connection, whichever comes first), so
//! that no count of clients (each HTTP/2 connection may pass 100 streams
//! through, each its own HTTP/1.1 connection upstream) runs kubecache out
//! of open files. `kubecache_passthrough_connections` counts those open.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use hyper::Uri;
use hyper::rt::{Read, ReadBufCursor, Write};
use hyper_util::client::legacy::connect::{Connected, Connection};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tower::{BoxError, Service};

/// A connector of `C` whose connections, at most the semaphore's permits,
/// are open at once.
#[derive(Clone)]
pub(super) struct Bounded<C> {
    connector: C,
    permits: Arc<Semaphore>,
}

impl<C> Bounded<C> {
    /// `connector`, its connections sharing `permits` with every other
    /// connector given them.
    pub(super) fn new(connector: C, permits: Arc<Semaphore>) -> Self {
        Bounded { connector, permits }
    }
}

impl<C> Service<Uri> for Bounded<C>
where
    C: Service<Uri> + Clone + Send + 'static,
    C::Future: Send,
    C::Error: Into<BoxError>,
{
    type Response = Held<C::Response>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.connector.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        // The connector polled ready is the one that connects (tower's
        // contract); the clone waits in its place.
        let clone = self.connector.clone();
        let mut connector = std::mem::replace(&mut self.connector, clone);
        let permits = self.permits.clone();
        Box::pin(async move {
            let permit = permits.acquire_owned().await?;
            let io = connector.call(uri).await.map_err(Into::into)?;
            Ok(Held::new(io, permit))
        })
    }
}

/// A connection and the permit it holds until it is dropped.
pub(super) struct Held<T> {
    io: T,
    _permit: OwnedSemaphorePermit,
}

impl<T> Held<T> {
    fn new(io: T, permit: OwnedSemaphorePermit) -> Self {
        metrics::gauge!("kubecache_passthrough_connections").increment(1);
        Held {
            io,
            _permit: permit,
        }
    }
}

impl<T> Drop for Held<T> {
    fn drop(&mut self) {
        metrics::gauge!("kubecache_passthrough_connections").decrement(1);
    }
}

impl<T: Connection> Connection for Held<T> {
    fn connected(&self) -> Connected {
        self.io.connected()
    }
}

impl<T: Read + Unpin> Read for Held<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: ReadBufCursor<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl<T: Write + Unpin> Write for Held<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::pin::pin;

    #[tokio::test]
    async fn a_connection_beyond_the_permits_opens_when_one_closes() {
        // A connector that connects at once: only the bound can make a
        // call wait.
        let at_once = tower::service_fn(|_: Uri| async { Ok::<_, std::io::Error>(()) });
        let mut connector = Bounded::new(at_once, Arc::new(Semaphore::new(2)));
        let uri = Uri::from_static("http://api-server");
        let first = connector.call(uri.clone()).await.unwrap();
        let second = connector.call(uri.clone()).await.unwrap();
        let mut third = pin!(connector.call(uri.clone()));
        assert!(futures::poll!(third.as_mut()).is_pending());
        drop(first);
        let third = third.await.unwrap();
        assert!(futures::poll!(pin!(connector.call(uri))).is_pending());
        drop((second, third));
    }
}

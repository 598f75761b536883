//! Gets: `GET` of one cached object.
//!
//! Its `resourceVersion`, as for a list (see [`super::list`]): unset, a
//! consistent read, except that a GET that would wait for a cold probe is
//! passed through to the API server instead ([`Answer::Upstream`], unless
//! `--cold-get-passthrough=false`), and that the writer's next read after
//! its write waits for that write only; `0`, the store as it is; `N`, the
//! store once it has reached `N`.
//!
//! The answer is the object (with its own resourceVersion; a Table of it
//! too, as kube-apiserver's); the `X-Kubecache-Resource-Version` header
//! says the resourceVersion it was served at, as a list's does: the
//! proven or asked one when newer than the snapshot's (see [`super::list`]).

use axum::body::Body;
use kubecache_wire::{Encoding, ObjectKey, Status};

use super::Answer;
use super::bodies::{self, response};
use super::negotiate::Rendering;
use super::table::{self, TableMeta};
use crate::error::ApiError;
use crate::served::encoding::Kind;
use crate::served::freshness::Consistent;
use crate::served::{Cache, Caches};

/// `GET` of the object `name` in `namespace` at `resource_version`;
/// `own_write`: the client's first read after its write, which needs no
/// consistent read.
pub async fn serve(
    caches: &Caches,
    cache: &Cache,
    namespace: Option<&str>,
    name: &str,
    resource_version: Option<u64>,
    rendering: Rendering,
    own_write: bool,
) -> Result<Answer, ApiError> {
    let wait = caches.settings.read_wait;
    // The resourceVersion waited for (0: none).
    let waited = match resource_version {
        None if own_write => 0,
        None => match caches.consistent_get(cache).await? {
            Consistent::Proven(rv) => rv,
            Consistent::Cold => return Ok(Answer::Upstream),
        },
        Some(0) => 0,
        Some(rv) => {
            cache.freshness.not_older_than(rv, wait).await?;
            rv
        }
    };
    let snapshot = cache.reader.snapshot();
    let key = ObjectKey::new(namespace.unwrap_or_default(), name);
    let object = snapshot
        .get(&key)
        .ok_or_else(|| Status::not_found(&cache.resource.group, &cache.resource.plural, name))?;
    let (body, encoding) = match rendering {
        Rendering::Encoded(shape, encoding) => (
            bodies::object(&Kind::of(cache), object, shape, encoding)?,
            encoding,
        ),
        Rendering::Table { version, include } => (
            table::render(
                &cache.resource,
                version,
                include,
                // A table of one object is at the object's resourceVersion.
                &TableMeta {
                    resource_version: Some(object.resource_version),
                    ..TableMeta::default()
                },
                std::slice::from_ref(object),
                chrono::Utc::now(),
            ),
            Encoding::Json,
        ),
    };
    Ok(Answer::Served(response(
        Body::from(body),
        snapshot.resource_version().max(waited),
        encoding,
        false,
    )))
}

//! The objects a run reads and filters by, from one paginated list of
//! kubecache (pages of [`PAGE`], so that a million objects never sit in
//! one body).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde::Deserialize;

use super::RunContext;

/// What the load needs to know about one object.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ObjectFacts {
    /// `metadata.uid`.
    pub uid: String,
    /// `metadata.namespace`.
    pub namespace: String,
    /// `metadata.name`.
    pub name: String,
    /// `spec.nodeName`.
    pub node: String,
    /// `metadata.labels`.
    pub labels: BTreeMap<String, String>,
}

/// The objects of the resource at the start of the run.
pub struct Targets {
    /// The list's resourceVersion: watches start here.
    pub resource_version: u64,
    /// Every object, in list order.
    pub objects: Vec<ObjectFacts>,
    /// How long the list took.
    pub list_time: Duration,
}

#[derive(Deserialize)]
struct List {
    metadata: ListMeta,
    items: Vec<Item>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ListMeta {
    resource_version: String,
    #[serde(default, rename = "continue")]
    continue_token: String,
}

/// Objects per page of the list.
const PAGE: usize = 5_000;

/// Just the parts of an object the load needs (serde skips the rest).
#[derive(Deserialize, Default)]
#[serde(default)]
pub struct Item {
    metadata: ItemMeta,
    spec: ItemSpec,
}

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct ItemMeta {
    uid: String,
    namespace: String,
    name: String,
    labels: BTreeMap<String, String>,
}

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct ItemSpec {
    node_name: String,
}

impl From<Item> for ObjectFacts {
    fn from(item: Item) -> Self {
        ObjectFacts {
            uid: item.metadata.uid,
            namespace: item.metadata.namespace,
            name: item.metadata.name,
            node: item.spec.node_name,
            labels: item.metadata.labels,
        }
    }
}

impl ObjectFacts {
    /// Reads the facts of one object's JSON.
    pub fn parse(json: &[u8]) -> anyhow::Result<Self> {
        Ok(serde_json::from_slice::<Item>(json)?.into())
    }
}

impl Targets {
    /// Lists the resource from kubecache (a consistent read; every page
    /// of one snapshot).
    pub async fn list(ctx: &RunContext) -> anyhow::Result<Self> {
        let scenario = &ctx.scenario;
        let started = Instant::now();
        let collection = format!("{}{}", scenario.servers()[0], scenario.path);
        let mut objects = Vec::new();
        let mut resource_version = None;
        let mut continue_token = String::new();
        loop {
            let mut request = ctx.client.get(&collection).query(&[("limit", PAGE)]);
            if !continue_token.is_empty() {
                request = request.query(&[("continue", &continue_token)]);
            }
            if let Some(token) = &scenario.token {
                request = request.bearer_auth(token);
            }
            let url = format!("GET {collection}");
            let response = request.send().await.context(url.clone())?;
            let status = response.status();
            let body = response.bytes().await?;
            if !status.is_success() {
                bail!("{url}: {status}: {}", String::from_utf8_lossy(&body));
            }
            let list: List = serde_json::from_slice(&body).context(url)?;
            objects.extend(list.items.into_iter().map(ObjectFacts::from));
            resource_version.get_or_insert(list.metadata.resource_version);
            continue_token = list.metadata.continue_token;
            if continue_token.is_empty() {
                break;
            }
        }
        if objects.is_empty() {
            bail!("GET {collection}: no objects to load");
        }
        Ok(Targets {
            resource_version: resource_version.unwrap_or_default().parse()?,
            objects,
            list_time: started.elapsed(),
        })
    }

    /// The object at `i` (wrapping).
    pub fn object(&self, i: usize) -> &ObjectFacts {
        &self.objects[i % self.objects.len()]
    }
}

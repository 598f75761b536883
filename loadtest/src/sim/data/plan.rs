//! Namespaces, nodes and workloads: the cluster a generator plans when it is
//! created, and how many pods each workload gets.

use rand::Rng;
use rand::rngs::SmallRng;

use super::catalogue::{
    AppSpec, INGRESS, KUBE_SYSTEM, Kind, LOGGING, MONITORING, TEAM_AGENT, TEAM_JOBS, TEAM_SERVICES,
    TEAM_STORES,
};
use super::random::{hash, pick_distinct, safe_encode, uuid};
use super::render::Spliced;
use super::template::PodTemplate;

pub(super) const REGIONS: &[&str] = &[
    "us-east-1",
    "us-west-2",
    "eu-west-1",
    "eu-central-1",
    "ap-southeast-1",
];

const TEAMS: &[&str] = &[
    "payments",
    "checkout",
    "catalog",
    "search",
    "identity",
    "billing",
    "notifications",
    "orders",
    "inventory",
    "shipping",
    "analytics",
    "recommendations",
    "fraud",
    "messaging",
    "media",
    "pricing",
    "loyalty",
    "reviews",
    "support",
    "ledger",
];
const ENVIRONMENTS: &[&str] = &["prod", "staging", "dev"];

#[derive(Debug, Clone)]
pub(super) struct NamespaceInfo {
    pub(super) name: String,
    /// The owning team; `None` for the system namespaces.
    pub(super) team: Option<&'static str>,
    pub(super) env: &'static str,
}

/// `kube-system` first, the other system namespaces at positions 2, 5 and 8,
/// team namespaces (`{team}-{env}`, then `{team}-{env}-{n}`) elsewhere.
pub(super) fn plan_namespaces(count: usize) -> Vec<NamespaceInfo> {
    let system = ["kube-system", "monitoring", "logging", "ingress-nginx"];
    let mut system_used = 0;
    let mut team_seq = 0;
    (0..count)
        .map(|i| {
            if [0, 2, 5, 8].contains(&i) && system_used < system.len() {
                system_used += 1;
                return NamespaceInfo {
                    name: system[system_used - 1].into(),
                    team: None,
                    env: "prod",
                };
            }
            let combos = TEAMS.len() * ENVIRONMENTS.len();
            let (round, k) = (team_seq / combos, team_seq % combos);
            team_seq += 1;
            let team = TEAMS[k % TEAMS.len()];
            let env = ENVIRONMENTS[k / TEAMS.len()];
            let name = if round == 0 {
                format!("{team}-{env}")
            } else {
                format!("{team}-{env}-{}", round + 1)
            };
            NamespaceInfo {
                name,
                team: Some(team),
                env,
            }
        })
        .collect()
}

#[derive(Debug, Clone)]
pub(super) struct Node {
    pub(super) name: String,
    pub(super) ip: String,
    /// First two octets of the node's pod /24 (`10.x.y.0/24`).
    pod_net: (u8, u8),
    /// Pod IPs handed out on this node so far.
    pods: u32,
}

impl Node {
    pub(super) fn new(index: usize, region: &str) -> Self {
        let n = index + 10;
        let ip = format!("172.{}.{}.{}", 16 + (n >> 16) % 16, (n >> 8) & 255, n & 255);
        let domain = if region == "us-east-1" {
            "ec2.internal".to_owned()
        } else {
            format!("{region}.compute.internal")
        };
        let name = format!("ip-{}.{domain}", ip.replace('.', "-"));
        let pod_net = (128 + ((index >> 8) & 127) as u8, (index & 255) as u8);
        Node {
            name,
            ip,
            pod_net,
            pods: 0,
        }
    }

    /// The next pod IP of this node's /24, cycling through `.2`–`.254`.
    pub(super) fn next_pod_ip(&mut self) -> String {
        let host = 2 + self.pods % 253;
        self.pods += 1;
        format!("10.{}.{}.{host}", self.pod_net.0, self.pod_net.1)
    }
}

/// A set of pods with one owner and one template.
#[derive(Debug, Clone)]
pub(super) struct Workload {
    pub(super) kind: Kind,
    pub(super) app: &'static AppSpec,
    pub(super) namespace: usize,
    /// The app's name: the Deployment, StatefulSet, DaemonSet or CronJob.
    pub(super) name: String,
    /// The owner's name: `{deployment}-{hash}` for a ReplicaSet,
    /// `{cronjob}-{scheduled minute}` for a Job, else `name`.
    pub(super) owner: String,
    pub(super) owner_uid: String,
    /// `pod-template-hash` or `controller-revision-hash`.
    pub(super) revision: String,
    /// Pods of this workload relative to others: its replicas.
    pub(super) weight: u64,
    /// Seed of the template's own random stream.
    pub(super) seed: u64,
    /// Pods made so far: StatefulSet ordinals, DaemonSet node cursor.
    pub(super) next_ordinal: u64,
    /// Built on first use.
    pub(super) template: Option<Box<PodTemplate>>,
    /// The template serialised for
    /// [`Generator::pod_json`](super::Generator::pod_json), made on first
    /// use: running pods, succeeded pods.
    pub(super) spliced: [Option<Spliced>; 2],
}

/// Team namespaces with a DaemonSet of their own, at most.
const MAX_TEAM_AGENTS: usize = 3;

/// Pods per node that are not DaemonSet pods in a typical cluster (about 30
/// pods per node of which 5–8 belong to DaemonSets).
const OTHER_PODS_PER_NODE: u64 = 24;

/// The workloads of namespace `namespace` (`agents`: team DaemonSets so far).
pub(super) fn plan_workloads(
    seed: u64,
    rng: &mut SmallRng,
    namespace: usize,
    info: &NamespaceInfo,
    nodes: usize,
    agents: &mut usize,
    out: &mut Vec<Workload>,
) {
    let apps: Vec<&'static AppSpec> = match (info.team, info.name.as_str()) {
        (None, "kube-system") => KUBE_SYSTEM.iter().collect(),
        (None, "monitoring") => MONITORING.iter().collect(),
        (None, "logging") => LOGGING.iter().collect(),
        (None, _) => INGRESS.iter().collect(),
        (Some(_), _) => {
            let mut apps: Vec<&AppSpec> = Vec::new();
            let services = rng.random_range(3..=7);
            apps.extend(pick_distinct(rng, TEAM_SERVICES, services));
            let stores = rng.random_range(0..=2);
            apps.extend(pick_distinct(rng, TEAM_STORES, stores));
            let jobs = rng.random_range(1..=2);
            apps.extend(pick_distinct(rng, TEAM_JOBS, jobs));
            if rng.random_bool(0.1) && *agents < MAX_TEAM_AGENTS {
                *agents += 1;
                apps.push(&TEAM_AGENT);
            }
            apps
        }
    };
    for app in apps {
        let name = match info.team {
            Some(team) if !app.shared_name => format!("{team}-{}", app.name),
            _ => app.name.to_owned(),
        };
        let hash_seed = hash(seed, &[&info.name, &name]);
        let (owner, revision) = match app.kind {
            Kind::ReplicaSet => {
                let h = safe_encode(hash_seed, 10);
                (format!("{name}-{h}"), h)
            }
            Kind::DaemonSet => (name.clone(), safe_encode(hash_seed, 10)),
            Kind::StatefulSet => (
                name.clone(),
                format!("{name}-{}", safe_encode(hash_seed, 10)),
            ),
            Kind::Job if app.cron => {
                // CronJob jobs are named after their scheduled minute since the epoch.
                (
                    format!("{name}-{}", 28_400_000 + hash_seed % 500_000),
                    String::new(),
                )
            }
            Kind::Job => (format!("{name}-{}", 1 + hash_seed % 90), String::new()),
        };
        let owner_uid = uuid(seed, &[&info.name, app.kind.name(), &owner]);
        let weight = match app.kind {
            Kind::DaemonSet => nodes as u64,
            _ => {
                let base = u64::from(app.replicas);
                let scale = if info.env == "prod" {
                    rng.random_range(1..=4)
                } else {
                    1
                };
                base * scale
            }
        };
        out.push(Workload {
            kind: app.kind,
            app,
            namespace,
            name,
            owner,
            owner_uid,
            revision,
            weight,
            seed: hash_seed,
            next_ordinal: 0,
            template: None,
            spliced: [None, None],
        });
    }
}

/// Scales the weights of the workloads that are not DaemonSets so that, with
/// one pod per node per DaemonSet, the mix is that of a cluster with
/// [`OTHER_PODS_PER_NODE`] other pods per node. Only scales up: many
/// namespaces on few nodes keep their replicas.
pub(super) fn balance_weights(workloads: &mut [Workload], nodes: usize) {
    let others: u64 = workloads
        .iter()
        .filter(|w| w.kind != Kind::DaemonSet)
        .map(|w| w.weight)
        .sum();
    let scale = (nodes as u64 * OTHER_PODS_PER_NODE)
        .div_ceil(others.max(1))
        .max(1);
    for w in workloads.iter_mut().filter(|w| w.kind != Kind::DaemonSet) {
        w.weight *= scale;
    }
}

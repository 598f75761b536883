//! The catalogue of apps workloads are planned from: the system components of
//! `kube-system`, `monitoring`, `logging` and `ingress-nginx`, and the services,
//! stores, jobs and agents of team namespaces.

/// How the kubelet checks a container.
#[derive(Clone, Copy, Debug)]
pub(super) enum Health {
    /// `httpGet` on the first port, at this path.
    Http(&'static str),
    /// `tcpSocket` on the first port.
    Tcp,
    /// `exec` of this command.
    Exec(&'static [&'static str]),
    None,
}

#[derive(Debug)]
pub(super) struct PortSpec {
    pub(super) name: &'static str,
    pub(super) port: i32,
    pub(super) protocol: &'static str,
}

const fn tcp(name: &'static str, port: i32) -> PortSpec {
    PortSpec {
        name,
        port,
        protocol: "TCP",
    }
}

/// An environment variable; `$APP`, `$NS` and `$ENV` in values are replaced.
#[derive(Debug)]
pub(super) enum Env {
    Value(&'static str, &'static str),
    Field(&'static str, &'static str),
    /// Name, secret name, key.
    Secret(&'static str, &'static str, &'static str),
    /// Name, config map name, key.
    ConfigMap(&'static str, &'static str, &'static str),
    /// Name, resource (`limits.cpu`).
    Resource(&'static str, &'static str),
}

#[derive(Debug)]
pub(super) enum Source {
    ConfigMap(&'static str),
    Secret(&'static str),
    EmptyDir,
    HostPath(&'static str, &'static str),
    /// The StatefulSet's `data` volume claim.
    Claim,
}

/// A volume of the pod, mounted in the main container at `mount`.
#[derive(Debug)]
pub(super) struct VolumeSpec {
    pub(super) name: &'static str,
    pub(super) source: Source,
    pub(super) mount: &'static str,
    pub(super) read_only: bool,
}

#[derive(Debug)]
pub(super) struct ContainerSpec {
    /// `""`: the app's name.
    pub(super) name: &'static str,
    /// `""`: the team's own image, `{registry}/{team}/{app}:{version}`.
    pub(super) image: &'static str,
    pub(super) ports: &'static [PortSpec],
    pub(super) health: Health,
    pub(super) args: &'static [&'static str],
    pub(super) env: &'static [Env],
    /// Volumes (by name) mounted in this container; main containers mount all.
    pub(super) mounts: &'static [&'static str],
}

/// The kind of a pod's controlling owner.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    ReplicaSet,
    DaemonSet,
    StatefulSet,
    Job,
}

impl Kind {
    pub(super) fn api_version(self) -> &'static str {
        match self {
            Kind::Job => "batch/v1",
            _ => "apps/v1",
        }
    }
    pub(super) fn name(self) -> &'static str {
        match self {
            Kind::ReplicaSet => "ReplicaSet",
            Kind::DaemonSet => "DaemonSet",
            Kind::StatefulSet => "StatefulSet",
            Kind::Job => "Job",
        }
    }
}

#[derive(Debug)]
pub(super) struct AppSpec {
    pub(super) name: &'static str,
    pub(super) kind: Kind,
    /// Replicas, scaled up in production namespaces.
    pub(super) replicas: u32,
    /// The name is not prefixed with the team (databases, agents).
    pub(super) shared_name: bool,
    /// A Job made by a CronJob.
    pub(super) cron: bool,
    pub(super) host_network: bool,
    /// Runs with `system-node-critical` or `system-cluster-critical`.
    pub(super) critical: bool,
    pub(super) containers: &'static [ContainerSpec],
    /// Sidecars a team may add (none, one or two of them).
    pub(super) optional_sidecars: &'static [ContainerSpec],
    pub(super) volumes: &'static [VolumeSpec],
    /// Volumes of which a team picks some.
    pub(super) optional_volumes: &'static [VolumeSpec],
}

const APP: AppSpec = AppSpec {
    name: "",
    kind: Kind::ReplicaSet,
    replicas: 2,
    shared_name: false,
    cron: false,
    host_network: false,
    critical: false,
    containers: &[],
    optional_sidecars: &[],
    volumes: &[],
    optional_volumes: &[],
};

const CONTAINER: ContainerSpec = ContainerSpec {
    name: "",
    image: "",
    ports: &[],
    health: Health::None,
    args: &[],
    env: &[],
    mounts: &[],
};

pub(super) const COMMON_ENV: &[Env] = &[
    Env::Value("ENVIRONMENT", "$ENV"),
    Env::Value("LOG_LEVEL", "info"),
    Env::Value("LOG_FORMAT", "json"),
    Env::Field("POD_NAME", "metadata.name"),
    Env::Field("POD_NAMESPACE", "metadata.namespace"),
    Env::Field("POD_IP", "status.podIP"),
    Env::Field("NODE_NAME", "spec.nodeName"),
    Env::Secret("DATABASE_URL", "$APP-db", "url"),
    Env::Secret("API_TOKEN", "$APP-credentials", "token"),
    Env::ConfigMap("FEATURE_FLAGS", "$APP-features", "flags"),
    Env::Value(
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "http://otel-collector.monitoring.svc.cluster.local:4317",
    ),
    Env::Value("OTEL_SERVICE_NAME", "$APP"),
    Env::Resource("GOMAXPROCS", "limits.cpu"),
    Env::Value("REDIS_ADDR", "redis-master.$NS.svc.cluster.local:6379"),
];

const TEAM_VOLUMES: &[VolumeSpec] = &[
    VolumeSpec {
        name: "config",
        source: Source::ConfigMap("$APP-config"),
        mount: "/etc/$APP",
        read_only: true,
    },
    VolumeSpec {
        name: "tls",
        source: Source::Secret("$APP-tls"),
        mount: "/etc/tls",
        read_only: true,
    },
    VolumeSpec {
        name: "tmp",
        source: Source::EmptyDir,
        mount: "/tmp",
        read_only: false,
    },
];

const SIDECARS: &[ContainerSpec] = &[
    ContainerSpec {
        name: "log-shipper",
        image: "cr.fluentbit.io/fluent/fluent-bit:2.2.2",
        ports: &[tcp("http", 2020)],
        mounts: &["tmp"],
        ..CONTAINER
    },
    ContainerSpec {
        name: "config-reloader",
        image: "ghcr.io/jimmidyson/configmap-reload:v0.12.0",
        args: &[
            "--volume-dir=/etc/config",
            "--webhook-url=http://127.0.0.1:8080/-/reload",
        ],
        mounts: &["config"],
        ..CONTAINER
    },
    ContainerSpec {
        name: "cloud-sql-proxy",
        image: "gcr.io/cloud-sql-connectors/cloud-sql-proxy:2.8.2",
        args: &[
            "--structured-logs",
            "--port=5432",
            "prod-db:europe-west1:main",
        ],
        ..CONTAINER
    },
];

/// A team's service: one container of its own image, optional sidecars and volumes.
macro_rules! service {
    ($name:expr, $ports:expr, $health:expr, $replicas:expr) => {
        AppSpec {
            name: $name,
            replicas: $replicas,
            containers: &[ContainerSpec {
                ports: $ports,
                health: $health,
                ..CONTAINER
            }],
            optional_sidecars: SIDECARS,
            optional_volumes: TEAM_VOLUMES,
            ..APP
        }
    };
}

const HTTP_PORTS: &[PortSpec] = &[tcp("http", 8080), tcp("metrics", 9090)];

pub(super) const TEAM_SERVICES: &[AppSpec] = &[
    service!("api", HTTP_PORTS, Health::Http("/healthz"), 3),
    service!("web", &[tcp("http", 8080)], Health::Http("/"), 3),
    service!("worker", &[tcp("metrics", 9090)], Health::Http("/livez"), 2),
    service!("gateway", HTTP_PORTS, Health::Http("/healthz"), 3),
    service!(
        "consumer",
        &[tcp("metrics", 9090)],
        Health::Http("/health"),
        2
    ),
    service!(
        "scheduler",
        &[tcp("http", 8080)],
        Health::Http("/healthz"),
        1
    ),
    service!(
        "admin",
        &[tcp("http", 3000)],
        Health::Http("/api/health"),
        1
    ),
    service!(
        "grpc",
        &[tcp("grpc", 9000), tcp("metrics", 9090)],
        Health::Tcp,
        3
    ),
    service!("webhook", &[tcp("https", 8443)], Health::Tcp, 2),
    service!(
        "notifier",
        &[tcp("metrics", 9090)],
        Health::Http("/healthz"),
        1
    ),
];

const DATA_VOLUME: VolumeSpec = VolumeSpec {
    name: "data",
    source: Source::Claim,
    mount: "/data",
    read_only: false,
};

pub(super) const TEAM_STORES: &[AppSpec] = &[
    AppSpec {
        name: "redis",
        kind: Kind::StatefulSet,
        replicas: 3,
        shared_name: true,
        containers: &[
            ContainerSpec {
                name: "redis",
                image: "docker.io/bitnami/redis:7.2.4-debian-12-r9",
                ports: &[tcp("redis", 6379)],
                health: Health::Exec(&["sh", "-c", "redis-cli -h localhost ping"]),
                env: &[
                    Env::Secret("REDIS_PASSWORD", "redis", "redis-password"),
                    Env::Value("REDIS_REPLICATION_MODE", "master"),
                    Env::Value("ALLOW_EMPTY_PASSWORD", "no"),
                ],
                ..CONTAINER
            },
            ContainerSpec {
                name: "metrics",
                image: "docker.io/bitnami/redis-exporter:1.58.0-debian-12-r4",
                ports: &[tcp("http-metrics", 9121)],
                env: &[Env::Value("REDIS_ALIAS", "redis")],
                ..CONTAINER
            },
        ],
        volumes: &[DATA_VOLUME],
        ..APP
    },
    AppSpec {
        name: "postgres",
        kind: Kind::StatefulSet,
        replicas: 2,
        shared_name: true,
        containers: &[ContainerSpec {
            name: "postgres",
            image: "docker.io/library/postgres:16.2",
            ports: &[tcp("postgresql", 5432)],
            health: Health::Exec(&["pg_isready", "-U", "postgres"]),
            env: &[
                Env::Value("PGDATA", "/data/pgdata"),
                Env::Secret("POSTGRES_PASSWORD", "postgres", "password"),
                Env::Field("POD_IP", "status.podIP"),
            ],
            ..CONTAINER
        }],
        volumes: &[DATA_VOLUME],
        ..APP
    },
    AppSpec {
        name: "rabbitmq",
        kind: Kind::StatefulSet,
        replicas: 3,
        shared_name: true,
        containers: &[ContainerSpec {
            name: "rabbitmq",
            image: "docker.io/library/rabbitmq:3.13.1-management",
            ports: &[
                tcp("amqp", 5672),
                tcp("management", 15672),
                tcp("prometheus", 15692),
            ],
            health: Health::Tcp,
            env: &[
                Env::Field("MY_POD_NAME", "metadata.name"),
                Env::Secret("RABBITMQ_ERLANG_COOKIE", "rabbitmq", "erlang-cookie"),
            ],
            ..CONTAINER
        }],
        volumes: &[DATA_VOLUME],
        ..APP
    },
];

/// A team's Job (one-off, or made by a CronJob) of its own image.
macro_rules! job {
    ($name:expr, $cron:expr) => {
        AppSpec {
            name: $name,
            kind: Kind::Job,
            replicas: 1,
            cron: $cron,
            containers: &[CONTAINER],
            optional_volumes: TEAM_VOLUMES,
            ..APP
        }
    };
}

pub(super) const TEAM_JOBS: &[AppSpec] = &[
    job!("db-migrate", false),
    job!("report", true),
    job!("cleanup", true),
    job!("backup", true),
];

pub(super) const TEAM_AGENT: AppSpec = AppSpec {
    name: "agent",
    kind: Kind::DaemonSet,
    containers: &[ContainerSpec {
        ports: &[tcp("metrics", 9090)],
        health: Health::Http("/healthz"),
        ..CONTAINER
    }],
    volumes: &[VolumeSpec {
        name: "host-logs",
        source: Source::HostPath("/var/log", ""),
        mount: "/var/log",
        read_only: true,
    }],
    ..APP
};

pub(super) const KUBE_SYSTEM: &[AppSpec] = &[
    AppSpec {
        name: "kube-proxy",
        kind: Kind::DaemonSet,
        shared_name: true,
        host_network: true,
        critical: true,
        containers: &[ContainerSpec {
            name: "kube-proxy",
            image: "registry.k8s.io/kube-proxy:v1.29.4",
            args: &[
                "--config=/var/lib/kube-proxy-config/config",
                "--hostname-override=$(NODE_NAME)",
            ],
            env: &[Env::Field("NODE_NAME", "spec.nodeName")],
            ..CONTAINER
        }],
        volumes: &[
            VolumeSpec {
                name: "xtables-lock",
                source: Source::HostPath("/run/xtables.lock", "FileOrCreate"),
                mount: "/run/xtables.lock",
                read_only: false,
            },
            VolumeSpec {
                name: "lib-modules",
                source: Source::HostPath("/lib/modules", ""),
                mount: "/lib/modules",
                read_only: true,
            },
            VolumeSpec {
                name: "config",
                source: Source::ConfigMap("kube-proxy-config"),
                mount: "/var/lib/kube-proxy-config/",
                read_only: false,
            },
        ],
        ..APP
    },
    AppSpec {
        name: "aws-node",
        kind: Kind::DaemonSet,
        shared_name: true,
        host_network: true,
        critical: true,
        containers: &[
            ContainerSpec {
                name: "aws-node",
                image: "602401143452.dkr.ecr.us-west-2.amazonaws.com/amazon-k8s-cni:v1.18.1-eksbuild.1",
                ports: &[tcp("metrics", 61678)],
                health: Health::Exec(&[
                    "/app/grpc-health-probe",
                    "-addr=:50051",
                    "-connect-timeout=5s",
                    "-rpc-timeout=5s",
                ]),
                env: &[
                    Env::Value("AWS_VPC_K8S_CNI_LOGLEVEL", "DEBUG"),
                    Env::Value("WARM_ENI_TARGET", "1"),
                    Env::Field("MY_NODE_NAME", "spec.nodeName"),
                ],
                ..CONTAINER
            },
            ContainerSpec {
                name: "aws-eks-nodeagent",
                image: "602401143452.dkr.ecr.us-west-2.amazonaws.com/amazon/aws-network-policy-agent:v1.1.1-eksbuild.1",
                args: &[
                    "--enable-ipv6=false",
                    "--enable-network-policy=false",
                    "--metrics-bind-addr=:8162",
                ],
                env: &[Env::Field("MY_NODE_NAME", "spec.nodeName")],
                ..CONTAINER
            },
        ],
        volumes: &[
            VolumeSpec {
                name: "cni-bin-dir",
                source: Source::HostPath("/opt/cni/bin", ""),
                mount: "/host/opt/cni/bin",
                read_only: false,
            },
            VolumeSpec {
                name: "cni-net-dir",
                source: Source::HostPath("/etc/cni/net.d", ""),
                mount: "/host/etc/cni/net.d",
                read_only: false,
            },
        ],
        ..APP
    },
    AppSpec {
        name: "ebs-csi-node",
        kind: Kind::DaemonSet,
        shared_name: true,
        critical: true,
        containers: &[
            ContainerSpec {
                name: "ebs-plugin",
                image: "public.ecr.aws/ebs-csi-driver/aws-ebs-csi-driver:v1.30.0",
                ports: &[tcp("healthz", 9808)],
                health: Health::Http("/healthz"),
                args: &[
                    "node",
                    "--endpoint=$(CSI_ENDPOINT)",
                    "--logging-format=text",
                    "--v=2",
                ],
                env: &[
                    Env::Value("CSI_ENDPOINT", "unix:/csi/csi.sock"),
                    Env::Field("CSI_NODE_NAME", "spec.nodeName"),
                ],
                ..CONTAINER
            },
            ContainerSpec {
                name: "node-driver-registrar",
                image: "public.ecr.aws/eks-distro/kubernetes-csi/node-driver-registrar:v2.10.1-eks-1-30-2",
                args: &[
                    "--csi-address=$(ADDRESS)",
                    "--kubelet-registration-path=$(DRIVER_REG_SOCK_PATH)",
                    "--v=2",
                ],
                env: &[
                    Env::Value("ADDRESS", "/csi/csi.sock"),
                    Env::Value(
                        "DRIVER_REG_SOCK_PATH",
                        "/var/lib/kubelet/plugins/ebs.csi.aws.com/csi.sock",
                    ),
                ],
                mounts: &["plugin-dir", "registration-dir"],
                ..CONTAINER
            },
        ],
        volumes: &[
            VolumeSpec {
                name: "plugin-dir",
                source: Source::HostPath(
                    "/var/lib/kubelet/plugins/ebs.csi.aws.com/",
                    "DirectoryOrCreate",
                ),
                mount: "/csi",
                read_only: false,
            },
            VolumeSpec {
                name: "registration-dir",
                source: Source::HostPath("/var/lib/kubelet/plugins_registry/", "Directory"),
                mount: "/registration",
                read_only: false,
            },
        ],
        ..APP
    },
    AppSpec {
        name: "coredns",
        replicas: 2,
        shared_name: true,
        critical: true,
        containers: &[ContainerSpec {
            name: "coredns",
            image: "602401143452.dkr.ecr.us-west-2.amazonaws.com/eks/coredns:v1.11.1-eksbuild.9",
            ports: &[
                PortSpec {
                    name: "dns",
                    port: 53,
                    protocol: "UDP",
                },
                tcp("dns-tcp", 53),
                tcp("metrics", 9153),
            ],
            health: Health::Http("/health"),
            args: &["-conf", "/etc/coredns/Corefile"],
            ..CONTAINER
        }],
        volumes: &[VolumeSpec {
            name: "config-volume",
            source: Source::ConfigMap("coredns"),
            mount: "/etc/coredns",
            read_only: true,
        }],
        ..APP
    },
    AppSpec {
        name: "metrics-server",
        replicas: 1,
        shared_name: true,
        critical: true,
        containers: &[ContainerSpec {
            name: "metrics-server",
            image: "registry.k8s.io/metrics-server/metrics-server:v0.7.1",
            ports: &[tcp("https", 10250)],
            health: Health::Http("/livez"),
            args: &[
                "--cert-dir=/tmp",
                "--secure-port=10250",
                "--kubelet-preferred-address-types=InternalIP",
                "--metric-resolution=15s",
            ],
            ..CONTAINER
        }],
        volumes: &[VolumeSpec {
            name: "tmp-dir",
            source: Source::EmptyDir,
            mount: "/tmp",
            read_only: false,
        }],
        ..APP
    },
];

pub(super) const MONITORING: &[AppSpec] = &[
    AppSpec {
        name: "node-exporter",
        kind: Kind::DaemonSet,
        shared_name: true,
        host_network: true,
        containers: &[ContainerSpec {
            name: "node-exporter",
            image: "quay.io/prometheus/node-exporter:v1.7.0",
            ports: &[tcp("http-metrics", 9100)],
            health: Health::Http("/"),
            args: &[
                "--path.procfs=/host/proc",
                "--path.sysfs=/host/sys",
                "--web.listen-address=[$(HOST_IP)]:9100",
            ],
            env: &[Env::Value("HOST_IP", "0.0.0.0")],
            ..CONTAINER
        }],
        volumes: &[
            VolumeSpec {
                name: "proc",
                source: Source::HostPath("/proc", ""),
                mount: "/host/proc",
                read_only: true,
            },
            VolumeSpec {
                name: "sys",
                source: Source::HostPath("/sys", ""),
                mount: "/host/sys",
                read_only: true,
            },
        ],
        ..APP
    },
    AppSpec {
        name: "prometheus",
        kind: Kind::StatefulSet,
        replicas: 2,
        shared_name: true,
        containers: &[
            ContainerSpec {
                name: "prometheus",
                image: "quay.io/prometheus/prometheus:v2.51.2",
                ports: &[tcp("http-web", 9090)],
                health: Health::Http("/-/healthy"),
                args: &[
                    "--config.file=/etc/prometheus/config_out/prometheus.env.yaml",
                    "--storage.tsdb.path=/prometheus",
                    "--storage.tsdb.retention.time=10d",
                    "--web.enable-lifecycle",
                ],
                ..CONTAINER
            },
            ContainerSpec {
                name: "config-reloader",
                image: "quay.io/prometheus-operator/prometheus-config-reloader:v0.73.2",
                ports: &[tcp("reloader-web", 8080)],
                args: &[
                    "--listen-address=:8080",
                    "--reload-url=http://127.0.0.1:9090/-/reload",
                ],
                env: &[
                    Env::Field("POD_NAME", "metadata.name"),
                    Env::Value("SHARD", "0"),
                ],
                mounts: &["config"],
                ..CONTAINER
            },
        ],
        volumes: &[
            VolumeSpec {
                name: "config",
                source: Source::Secret("prometheus-config"),
                mount: "/etc/prometheus/config",
                read_only: true,
            },
            DATA_VOLUME,
        ],
        ..APP
    },
    AppSpec {
        name: "kube-state-metrics",
        replicas: 1,
        shared_name: true,
        containers: &[ContainerSpec {
            name: "kube-state-metrics",
            image: "registry.k8s.io/kube-state-metrics/kube-state-metrics:v2.12.0",
            ports: &[tcp("http", 8080), tcp("telemetry", 8081)],
            health: Health::Http("/healthz"),
            args: &[
                "--port=8080",
                "--telemetry-port=8081",
                "--resources=pods,nodes,deployments",
            ],
            ..CONTAINER
        }],
        ..APP
    },
    AppSpec {
        name: "grafana",
        replicas: 1,
        shared_name: true,
        containers: &[ContainerSpec {
            name: "grafana",
            image: "docker.io/grafana/grafana:10.4.2",
            ports: &[tcp("grafana", 3000)],
            health: Health::Http("/api/health"),
            env: &[
                Env::Secret("GF_SECURITY_ADMIN_USER", "grafana", "admin-user"),
                Env::Secret("GF_SECURITY_ADMIN_PASSWORD", "grafana", "admin-password"),
                Env::Value("GF_PATHS_DATA", "/var/lib/grafana/"),
            ],
            ..CONTAINER
        }],
        volumes: &[VolumeSpec {
            name: "config",
            source: Source::ConfigMap("grafana"),
            mount: "/etc/grafana/grafana.ini",
            read_only: false,
        }],
        ..APP
    },
];

pub(super) const LOGGING: &[AppSpec] = &[
    AppSpec {
        name: "fluent-bit",
        kind: Kind::DaemonSet,
        shared_name: true,
        containers: &[ContainerSpec {
            name: "fluent-bit",
            image: "cr.fluentbit.io/fluent/fluent-bit:2.2.2",
            ports: &[tcp("http", 2020)],
            health: Health::Http("/api/v1/health"),
            args: &[
                "--workdir=/fluent-bit/etc",
                "--config=/fluent-bit/etc/conf/fluent-bit.conf",
            ],
            ..CONTAINER
        }],
        volumes: &[
            VolumeSpec {
                name: "config",
                source: Source::ConfigMap("fluent-bit"),
                mount: "/fluent-bit/etc/conf",
                read_only: false,
            },
            VolumeSpec {
                name: "varlog",
                source: Source::HostPath("/var/log", ""),
                mount: "/var/log",
                read_only: false,
            },
        ],
        ..APP
    },
    AppSpec {
        name: "loki",
        kind: Kind::StatefulSet,
        replicas: 3,
        shared_name: true,
        containers: &[ContainerSpec {
            name: "loki",
            image: "docker.io/grafana/loki:2.9.6",
            ports: &[
                tcp("http-metrics", 3100),
                tcp("grpc", 9095),
                tcp("http-memberlist", 7946),
            ],
            health: Health::Http("/ready"),
            args: &["-config.file=/etc/loki/config/config.yaml", "-target=all"],
            ..CONTAINER
        }],
        volumes: &[
            VolumeSpec {
                name: "config",
                source: Source::ConfigMap("loki"),
                mount: "/etc/loki/config",
                read_only: false,
            },
            DATA_VOLUME,
        ],
        ..APP
    },
];

pub(super) const INGRESS: &[AppSpec] = &[
    AppSpec {
        name: "ingress-nginx-controller",
        replicas: 3,
        shared_name: true,
        containers: &[ContainerSpec {
            name: "controller",
            image: "registry.k8s.io/ingress-nginx/controller:v1.10.1",
            ports: &[tcp("http", 80), tcp("https", 443), tcp("webhook", 8443)],
            health: Health::Http("/healthz"),
            args: &[
                "/nginx-ingress-controller",
                "--publish-service=$(POD_NAMESPACE)/ingress-nginx-controller",
                "--election-id=ingress-nginx-leader",
                "--controller-class=k8s.io/ingress-nginx",
            ],
            env: &[
                Env::Field("POD_NAME", "metadata.name"),
                Env::Field("POD_NAMESPACE", "metadata.namespace"),
                Env::Value("LD_PRELOAD", "/usr/local/lib/libmimalloc.so"),
            ],
            ..CONTAINER
        }],
        volumes: &[VolumeSpec {
            name: "webhook-cert",
            source: Source::Secret("ingress-nginx-admission"),
            mount: "/usr/local/certificates/",
            read_only: true,
        }],
        ..APP
    },
    AppSpec {
        name: "ingress-nginx-admission-create",
        kind: Kind::Job,
        replicas: 1,
        shared_name: true,
        containers: &[ContainerSpec {
            name: "create",
            image: "registry.k8s.io/ingress-nginx/kube-webhook-certgen:v1.4.1",
            args: &[
                "create",
                "--host=ingress-nginx-controller-admission,ingress-nginx-controller-admission.$(POD_NAMESPACE).svc",
                "--namespace=$(POD_NAMESPACE)",
                "--secret-name=ingress-nginx-admission",
            ],
            env: &[Env::Field("POD_NAMESPACE", "metadata.namespace")],
            ..CONTAINER
        }],
        ..APP
    },
];

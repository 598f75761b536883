//! Config maps: the values and configuration files Helm renders into their
//! `data`, and what Helm owns of them.

use rand::Rng;
use rand::rngs::SmallRng;
use serde_json::{Value, json};

use super::as_map;
use super::managed_fields::{field_set, fields_v1};

/// The annotation the config map mutations count up.
pub(super) const CONFIG_REVISION: &str = "config.example.com/revision";

/// What Helm owns of a config map: its data, labels and annotations.
pub(super) fn helm_fields(cm: &Value) -> Value {
    let meta = json!({
        "annotations": cm["metadata"]["annotations"],
        "labels": cm["metadata"]["labels"],
    });
    json!({
        "f:data": field_set("data", &cm["data"]),
        "f:metadata": fields_v1(as_map(&meta)),
    })
}

type Render = fn(&mut SmallRng, &str) -> String;

pub(super) const CONFIG_KEYS: &[(&str, Render)] = &[
    ("LOG_LEVEL", |rng, _| {
        ["info", "debug", "warn"][rng.random_range(0..3)].into()
    }),
    ("CACHE_TTL_SECONDS", |rng, _| {
        (60 * rng.random_range(1..60)).to_string()
    }),
    ("FEATURE_NEW_CHECKOUT", |rng, _| {
        rng.random_bool(0.5).to_string()
    }),
    ("UPSTREAM_URL", |_, app| {
        format!("http://{app}.svc.cluster.local:8080")
    }),
    ("MAX_CONNECTIONS", |rng, _| {
        rng.random_range(10..500).to_string()
    }),
];

pub(super) const CONFIG_FILES: &[(&str, Render)] = &[
    ("application.yaml", |rng, app| {
        format!(
            "server:\n  port: 8080\n  shutdown: graceful\nspring:\n  application:\n    name: {app}\n  datasource:\n    url: jdbc:postgresql://postgres:5432/{db}\n    hikari:\n      maximum-pool-size: {pool}\n      connection-timeout: 30000\nmanagement:\n  endpoints:\n    web:\n      exposure:\n        include: health,info,prometheus\nlogging:\n  level:\n    root: {level}\n",
            db = app.replace('-', "_"),
            pool = rng.random_range(5..50),
            level = ["INFO", "WARN", "DEBUG"][rng.random_range(0..3)],
        )
    }),
    ("nginx.conf", |rng, app| {
        format!(
            "worker_processes auto;\nevents {{\n  worker_connections {conns};\n}}\nhttp {{\n  sendfile on;\n  keepalive_timeout 65;\n  upstream backend {{\n    server {app}:8080;\n  }}\n  server {{\n    listen 8080;\n    location / {{\n      proxy_pass http://backend;\n      proxy_read_timeout {timeout}s;\n    }}\n    location /healthz {{\n      return 200 'ok';\n    }}\n  }}\n}}\n",
            conns = 256 * rng.random_range(1..16),
            timeout = rng.random_range(5..120),
        )
    }),
    ("config.json", |rng, app| {
        format!(
            "{{\n  \"service\": \"{app}\",\n  \"listen\": \":8080\",\n  \"timeouts\": {{ \"read\": \"{r}s\", \"write\": \"{w}s\" }},\n  \"rateLimit\": {{ \"rps\": {rps}, \"burst\": {burst} }},\n  \"features\": [\"tracing\", \"metrics\"]\n}}\n",
            r = rng.random_range(1..30),
            w = rng.random_range(1..30),
            rps = rng.random_range(10..1000),
            burst = rng.random_range(10..200),
        )
    }),
    ("settings.toml", |rng, app| {
        format!(
            "[service]\nname = \"{app}\"\nworkers = {workers}\n\n[database]\npool_size = {pool}\nstatement_timeout_ms = {timeout}\n\n[cache]\nenabled = true\nttl_seconds = {ttl}\n",
            workers = rng.random_range(1..16),
            pool = rng.random_range(5..50),
            timeout = 1000 * rng.random_range(1..30),
            ttl = 60 * rng.random_range(1..60),
        )
    }),
];

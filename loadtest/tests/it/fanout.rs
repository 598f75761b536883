//! `kubecache-loadtest fanout` runs one load against several servers in
//! turn: a server that delivers every event gets a complete row, one that
//! misses events gets them counted as lost, over either protocol.

use kubecache_loadtest::fanout::{Fanout, FanoutReport, fanout};
use kubecache_loadtest::run::{Protocol, Scenario, WatchReport};
use kubecache_loadtest::sim::{Sim, SimConfig};

const WATCHERS: usize = 6;

fn config(targets: &[(&str, &str)], upstream: &str, protocol: Protocol) -> Fanout {
    Fanout {
        load: Scenario {
            upstream: upstream.into(),
            duration_secs: 2,
            settle_secs: 1,
            gets: 0.0,
            watchers: WATCHERS,
            watch_filters: vec!["all".into()],
            protocol,
            addresses: 3,
            writes_per_sec: 20.0,
            write_objects: 5,
            ..Scenario::default()
        },
        targets: targets
            .iter()
            .map(|(name, url)| format!("{name}={url}").parse().unwrap())
            .collect(),
        target_tokens: Vec::new(),
        target_ca_files: Vec::new(),
        target_pids: Vec::new(),
    }
}

fn sim_config() -> SimConfig {
    SimConfig {
        pods: 100,
        ..SimConfig::default()
    }
}

fn watch(report: &FanoutReport, row: usize) -> &WatchReport {
    let run = report.rows[row].run.as_ref().expect("the run started");
    run.watch.as_ref().expect("watchers watched")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn servers_that_deliver_every_event_get_complete_rows_over_both_protocols() {
    let (url, _sim) = Sim::start(sim_config()).await.unwrap();
    for protocol in [Protocol::Http1, Protocol::Http2] {
        let targets = [("first", url.as_str()), ("again", url.as_str())];
        // The sim serves from this process: its CPU is counted.
        let mut config = config(&targets, &url, protocol);
        let me = std::process::id();
        config.target_pids = ["first", "again"]
            .map(|name| format!("{name}={me}").parse().unwrap())
            .into();
        let report = fanout(config).await.unwrap();
        assert!(report.ok(), "{report}");
        assert_eq!(report.rows.len(), 2, "{report}");
        for row in 0..2 {
            let w = watch(&report, row);
            assert!(w.complete && w.lost == 0, "{report}");
            assert!(w.reference_events > 0, "{report}");
            assert!(
                w.deliveries >= (w.reference_events * WATCHERS) as u64,
                "{report}"
            );
            // The sim speaks HTTP/1.1 only: HTTP/2 falls back, as
            // client-go's transport does, and the row says so.
            assert_eq!(
                w.protocols.get("HTTP/1.1").copied(),
                Some(WATCHERS),
                "{report}"
            );
        }
        assert_eq!(report.rows[0].deliveries_ratio, Some(1.0), "{report}");
        assert_eq!(report.rows[0].per_cpu_ratio, Some(1.0), "{report}");
        for row in &report.rows {
            assert!(row.cpu_seconds.is_some_and(|s| s > 0.0), "{report}");
            assert!(row.deliveries_per_cpu_second.is_some(), "{report}");
        }
        assert!(report.rows[1].deliveries_ratio.is_some(), "{report}");
        let table = report.to_string();
        for target in ["| first |", "| again |"] {
            assert!(table.contains(target), "{table}");
        }
        assert!(!table.contains("**no**"), "{table}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_misses_the_writes_has_every_missed_event_counted_lost() {
    // Two simulators with the same seed start identical; the writes go to
    // one, and the other never sees them.
    let (upstream, _a) = Sim::start(sim_config()).await.unwrap();
    let (other, _b) = Sim::start(sim_config()).await.unwrap();
    let targets = [("written", upstream.as_str()), ("other", other.as_str())];
    let report = fanout(config(&targets, &upstream, Protocol::Http1))
        .await
        .unwrap();
    assert!(!report.ok(), "{report}");
    let written = watch(&report, 0);
    assert!(written.complete && written.lost == 0, "{report}");
    let missed = watch(&report, 1);
    assert!(!missed.complete, "{report}");
    assert!(missed.reference_events > 0, "{report}");
    assert_eq!(
        missed.lost,
        (missed.reference_events * WATCHERS) as u64,
        "{report}"
    );
    assert_eq!(report.rows[1].deliveries_ratio, Some(0.0), "{report}");
    assert!(report.to_string().contains("**no**"), "{report}");
}

#[tokio::test]
async fn bad_targets_are_refused_before_any_run() {
    let url = "http://127.0.0.1:1";
    let refused =
        |config: Fanout| async move { format!("{:#}", fanout(config).await.unwrap_err()) };
    let twice = config(&[("a", url), ("a", url)], url, Protocol::Http1);
    assert!(refused(twice).await.contains("named twice"));
    let mut unknown = config(&[("a", url)], url, Protocol::Http1);
    unknown.target_tokens = vec!["b=bob-token".parse().unwrap()];
    assert!(refused(unknown).await.contains("no --target is named"));
    let mut https = config(&[("a", "https://127.0.0.1:1")], url, Protocol::Http2);
    assert!(refused(https.clone()).await.contains("CA"));
    https.load.addresses = 0;
    https.target_ca_files = vec!["a=/nonexistent/ca.crt".parse().unwrap()];
    assert!(refused(https).await.contains("addresses"));
    let none = config(&[], url, Protocol::Http1);
    assert!(refused(none).await.contains("at least one"));
    assert!(
        "no-equals-sign"
            .parse::<kubecache_loadtest::fanout::Named>()
            .is_err()
    );
}

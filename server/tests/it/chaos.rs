//! `kubecache-loadtest chaos` against kubecache over TLS, in short:
//! well-behaved watchers and readers (HTTP/2, as client-go) keep getting
//! every event and every answer while hostile clients (non-readers,
//! slowloris, giant selectors, table lists, held-page churn, reconnect
//! storms, idle connections, held bodies and `Expect: 100-continue`,
//! half-open TLS, Table watches, a streaming-list storm, token churn,
//! stalled reviews; and over HTTP/2 rapid reset, CONTINUATION, SETTINGS and
//! PING floods, unread streams, streams beyond the bound) attack kubecache
//! and the API server cuts and fails its watches.

use crate::common;

use common::pki::{Pki, tls_files};
use common::{Setup, serve};
use kubecache_loadtest::chaos::{Chaos, H2Hostile, Hostile, chaos};
use kubecache_loadtest::run::Scenario;
use kubecache_loadtest::sim::{Policy, SimConfig};
use kubecache_server::auth::AuthSettings;
use kubecache_server::transport::Tls;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn well_behaved_clients_get_everything_beside_hostile_ones_and_upstream_faults() {
    let pki = Pki::new("chaos");
    let ca_file = pki.write("ca.crt", &pki.ca_pem());
    let served = serve(Setup {
        sim: SimConfig {
            pods: 1_000,
            policy: Some(Policy::demo()),
            ..SimConfig::default()
        },
        // Authenticated, so that token churn, review churn and stalled
        // reviews reach the reviews; the well-behaved user's first GET of
        // each pod (a review each) within its burst.
        auth: Some(AuthSettings {
            user_review_burst: 5_000,
            ..AuthSettings::default()
        }),
        // Node watchers are answered from the cache, not passed through
        // (where the API server's cuts would end them).
        store: common::node_index(),
        tls: Some(Tls::load(tls_files(&pki, "kubecache", None)).unwrap()),
        ..Setup::default()
    })
    .await;
    let report = chaos(Chaos {
        load: Scenario {
            url: served.url.clone(),
            upstream: served.sim.url().to_string(),
            ca_file: Some(ca_file),
            // Long enough for a stalled review to time out (10 s).
            duration_secs: 12,
            settle_secs: 2,
            concurrency: 2,
            gets: 1.0,
            lists: 0.05,
            list_limit: 200,
            watchers: 12,
            writes_per_sec: 50.0,
            token: Some("admin-token".into()),
            upstream_token: Some("admin-token".into()),
            ..Scenario::default()
        },
        baseline_secs: Some(2),
        hostile: Hostile {
            non_readers: 2,
            table_non_readers: 2,
            slowloris: 4,
            giant_selectors: 1,
            selector_requirements: 1_000,
            table_lists: 1,
            page_churners: 1,
            reconnect_storms: 1,
            idle_connections: 8,
            hostile_rate: 5.0,
            hold_secs: 2,
            body_holds: 2,
            expect_holds: 2,
            half_open_tls: 2,
            table_watches: 2,
            storm_watches: 4,
            token_churners: 1,
            review_churners: 2,
            stalled_review_waiters: 10,
            hostile_token: None,
            h2: H2Hostile {
                h2_rapid_resets: 1,
                h2_continuation_floods: 1,
                h2_settings_floods: 1,
                h2_ping_floods: 1,
                h2_settings_drainers: 1,
                h2_ping_drainers: 1,
                h2_unread_streams: 1,
                h2_many_streams: 1,
            },
        },
        fault_interval_secs: 1,
        kubecache_pid: Some(std::process::id()),
        rss_interval_secs: 1,
        rss_warmup_secs: 0,
        ..Chaos::default()
    })
    .await
    .unwrap();
    assert!(report.ok(), "{report}");
    let [baseline, hostile, after] = &report.phases[..] else {
        panic!("three phases: {report}");
    };
    for phase in [baseline, hostile, after] {
        let watch = phase.run.as_ref().and_then(|r| r.watch.as_ref());
        assert!(
            watch.is_some_and(|w| w.complete && w.deliveries > 0),
            "{}: {report}",
            phase.name
        );
        assert!(
            phase
                .large_list
                .as_ref()
                .is_some_and(|l| l.latency.count > 0),
            "{}: the large list probed: {report}",
            phase.name
        );
    }
    assert!(baseline.hostile.is_empty() && baseline.faults.is_empty());
    assert!(after.hostile.is_empty() && after.faults.is_empty());
    // Every hostile kind acted, and the faults reached the API server's
    // watches: the reference watch had to resume.
    assert_eq!(hostile.hostile.len(), 24, "{report}");
    assert!(
        hostile.hostile.iter().all(|h| !h.outcomes.is_empty()),
        "{report}"
    );
    assert!(
        !hostile.faults.is_empty() && hostile.faults.keys().all(|f| !f.contains("failed")),
        "{report}"
    );
    let resumes = hostile
        .run
        .as_ref()
        .and_then(|r| r.watch.as_ref())
        .map(|w| w.reference_resumes);
    assert!(resumes.is_some_and(|n| n > 0), "{report}");
    assert!(!report.rss.samples.is_empty(), "{report}");
    // The sim counted the reviews: the churning tokens' among them.
    assert!(
        hostile
            .reviews_per_sec
            .is_some_and(|r| r.token_reviews > 0.0),
        "{report}"
    );
}

//! `metrics::extract` on real `/metrics` pages captured from etcd 3.6.14 (what the suite and
//! the deployment run), and, as parser-regression fixtures, from etcd 3.5.1 and Debian's
//! 3.4.23 (tests/fixtures/README.md says how each was captured).

use leaderwatch::io::metrics::extract;
use leaderwatch::model::metrics::MemberMetrics;

fn page(name: &str) -> String {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// `process_start_time_seconds` of the 3.5.1 and 3.4.23 captures (started in the same
/// second) and of the 3.6.14 one, as the files have them.
const STARTED_2026_11_29: f64 = 1.79597905332e9;
const STARTED_3_6_14: f64 = 1.79613792593e9;

fn assert_common(m: &MemberMetrics, started: f64) {
    // A member that has just started counts the first leader it learns: 1.
    assert_eq!(m.leader_changes_seen_total, Some(1.0));
    assert_eq!(m.process_start_time, Some(started));
    assert_eq!(m.heartbeat_send_failures_total, Some(0.0));
    assert_eq!(m.slow_apply_total, Some(0.0));
}

#[test]
fn etcd_3_6_14_follower_page() {
    let m = extract(page("metrics-etcd-3.6.14.txt")).expect("a real etcd page");
    assert_common(&m, STARTED_3_6_14);
    assert_eq!(m.has_leader, Some(true));
    assert_eq!(m.is_leader, Some(false));
    assert_eq!(m.wal_fsync_count, Some(11.0));
    assert_eq!(m.wal_fsync_sum, Some(0.004422341000000001));
    assert_health_families(&m, Families { fsync: (10.0, 11.0), commits: 8.0 });
}

#[test]
fn etcd_3_6_14_leader_page() {
    let m = extract(page("metrics-etcd-3.6.14-leader.txt")).expect("a real etcd page");
    assert_common(&m, STARTED_3_6_14);
    assert_eq!((m.has_leader, m.is_leader), (Some(true), Some(true)));
    assert_eq!(m.wal_fsync_count, Some(13.0));
    assert_eq!(m.wal_fsync_sum, Some(0.032842028999999995));
    assert_health_families(&m, Families { fsync: (6.0, 13.0), commits: 9.0 });
}

#[test]
fn etcd_3_6_14_survivor_without_leader_page() {
    let m = extract(page("metrics-etcd-3.6.14-noleader.txt")).expect("a real etcd page");
    assert_eq!(m.has_leader, Some(false));
    assert_eq!(m.is_leader, Some(false));
    // It lost its leader but learned no new one: the counter has not moved.
    assert_eq!(m.leader_changes_seen_total, Some(1.0));
    assert_eq!(m.process_start_time, Some(STARTED_3_6_14));
    // Its two peers are dead; the histograms of their round trips are still on the page.
    assert_eq!(m.peer_rtt.len(), 2, "{:?}", m.peer_rtt.keys());
}

#[test]
fn etcd_3_5_1_follower_page() {
    let m = extract(page("metrics-etcd-3.5.1.txt")).expect("a real etcd page");
    assert_common(&m, STARTED_2026_11_29);
    assert_eq!(m.has_leader, Some(true));
    assert_eq!(m.is_leader, Some(false));
    assert_eq!(m.wal_fsync_count, Some(12.0));
    assert_eq!(m.wal_fsync_sum, Some(0.010654966000000002));
}

#[test]
fn etcd_3_5_1_leader_page() {
    let m = extract(page("metrics-etcd-3.5.1-leader.txt")).expect("a real etcd page");
    assert_common(&m, STARTED_2026_11_29);
    assert_eq!(m.is_leader, Some(true));
    assert_eq!(m.wal_fsync_count, Some(14.0));
    assert_health_families(&m, Families { fsync: (12.0, 14.0), commits: 10.0 });
}

/// What a page's health histograms hold: the WAL fsyncs in the first bucket (<= 1 ms) and
/// in all, and the backend commits in all (each read off the file).
struct Families {
    fsync: (f64, f64),
    commits: f64,
}

/// The families behind member health, as the page has them (checked against the file).
fn assert_health_families(m: &MemberMetrics, want: Families) {
    let fsync = m.wal_fsync.as_ref().expect("WAL fsync histogram");
    assert_eq!(fsync.buckets.len(), 15, "0.001 .. 8.192 s and +Inf");
    assert_eq!(fsync.count(), m.wal_fsync_count, "+Inf bucket = _count");
    assert_eq!(fsync.count(), Some(want.fsync.1));
    assert_eq!(fsync.buckets[0], (0.001, want.fsync.0));
    let commit = m.backend_commit.as_ref().expect("backend commit histogram");
    assert_eq!((commit.buckets.len(), commit.count()), (15, Some(want.commits)));
    assert_eq!(m.peer_rtt.len(), 2, "one histogram per peer: {:?}", m.peer_rtt.keys());
    assert!(m.peer_rtt.values().all(|h| h.count().is_some_and(|c| c > 0.0)));
    assert_eq!(m.db_total_size_bytes, Some(20480.0));
    assert_eq!(m.quota_backend_bytes, Some(2_147_483_648.0));
    assert_eq!((m.proposals_failed_total, m.slow_read_indexes_total), (Some(0.0), Some(0.0)));
}

#[test]
fn etcd_3_5_1_survivor_without_leader_page() {
    let m = extract(page("metrics-etcd-3.5.1-noleader.txt")).expect("a real etcd page");
    assert_eq!(m.has_leader, Some(false));
    assert_eq!(m.is_leader, Some(false));
    assert_eq!(m.leader_changes_seen_total, Some(1.0));
}

#[test]
fn etcd_3_4_23_debian_follower_page() {
    let m = extract(page("metrics-etcd-3.4.23.txt")).expect("a real etcd page");
    assert_common(&m, STARTED_2026_11_29);
    assert_eq!(m.has_leader, Some(true));
    assert_eq!(m.is_leader, Some(false));
    assert_eq!(m.wal_fsync_count, Some(12.0));
    assert_eq!(m.wal_fsync_sum, Some(0.007798312000000001));
}

#[test]
fn reduced_path_agrees_with_a_full_parse() {
    // The pre-filter must not change what the parser sees for the wanted families.
    for name in [
        "metrics-etcd-3.6.14.txt",
        "metrics-etcd-3.6.14-leader.txt",
        "metrics-etcd-3.5.1.txt",
        "metrics-etcd-3.4.23.txt",
    ] {
        let text = page(name);
        let full = prometheus_full(&text);
        let m = extract(&text).expect("page");
        assert_eq!(
            m.leader_changes_seen_total,
            full("etcd_server_leader_changes_seen_total"),
            "{name}"
        );
        assert_eq!(m.process_start_time, full("process_start_time_seconds"), "{name}");
        assert_eq!(m.wal_fsync_count, full("etcd_disk_wal_fsync_duration_seconds_count"), "{name}");
    }
}

#[test]
fn every_value_agrees_with_a_general_parser_on_every_fixture() {
    // prometheus-parse reads the whole page; extract's own line parsing must give the same
    // values and histograms, field by field.
    for name in [
        "metrics-etcd-3.6.14.txt",
        "metrics-etcd-3.6.14-leader.txt",
        "metrics-etcd-3.6.14-noleader.txt",
        "metrics-etcd-3.5.1.txt",
        "metrics-etcd-3.5.1-leader.txt",
        "metrics-etcd-3.5.1-noleader.txt",
        "metrics-etcd-3.4.23.txt",
    ] {
        let text = page(name);
        let m = extract(&text).expect("page");
        assert_eq!(m, reference(&text), "{name}");
        assert!(m.wal_fsync.is_some() && m.backend_commit.is_some(), "{name}");
    }
}

/// What a general parser makes of a page, in [`MemberMetrics`]' terms.
fn reference(text: &str) -> MemberMetrics {
    use leaderwatch::model::metrics::Histogram;
    use prometheus_parse::{Scrape, Value};
    let lines = text.lines().map(|l| Ok::<_, std::io::Error>(l.to_owned()));
    let scrape = Scrape::parse(lines).expect("a parsable page");
    let plain = |name: &str| {
        scrape
            .samples
            .iter()
            .filter(|s| s.metric == name && s.labels.is_empty())
            .filter_map(|s| match s.value {
                Value::Counter(v) | Value::Gauge(v) | Value::Untyped(v) => Some(v),
                _ => None,
            })
            .next_back()
            .filter(|v| v.is_finite())
    };
    let histogram = |name: &str, peer: Option<&str>| {
        scrape.samples.iter().find_map(|s| match &s.value {
            Value::Histogram(h) if s.metric == name && s.labels.get("To") == peer => {
                Some(Histogram::new(h.iter().map(|c| (c.less_than, c.count)).collect()))
            }
            _ => None,
        })
    };
    let mut m = MemberMetrics {
        leader_changes_seen_total: plain("etcd_server_leader_changes_seen_total"),
        has_leader: plain("etcd_server_has_leader").map(|v| v != 0.0),
        is_leader: plain("etcd_server_is_leader").map(|v| v != 0.0),
        process_start_time: plain("process_start_time_seconds"),
        heartbeat_send_failures_total: plain("etcd_server_heartbeat_send_failures_total"),
        slow_apply_total: plain("etcd_server_slow_apply_total"),
        wal_fsync_sum: plain("etcd_disk_wal_fsync_duration_seconds_sum"),
        wal_fsync_count: plain("etcd_disk_wal_fsync_duration_seconds_count"),
        proposals_failed_total: plain("etcd_server_proposals_failed_total"),
        slow_read_indexes_total: plain("etcd_server_slow_read_indexes_total"),
        db_total_size_bytes: plain("etcd_mvcc_db_total_size_in_bytes"),
        quota_backend_bytes: plain("etcd_server_quota_backend_bytes"),
        process_cpu_seconds_total: plain("process_cpu_seconds_total"),
        wal_fsync: histogram("etcd_disk_wal_fsync_duration_seconds", None),
        backend_commit: histogram("etcd_disk_backend_commit_duration_seconds", None),
        ..MemberMetrics::default()
    };
    for s in &scrape.samples {
        if s.metric == "etcd_network_peer_round_trip_time_seconds"
            && let Some(peer) = s.labels.get("To")
            && let Some(h) = histogram(&s.metric, Some(peer))
        {
            m.peer_rtt.insert(peer.to_owned(), h);
        }
        let peer = s.labels.get("To").or_else(|| s.labels.get("Remote"));
        let v = match s.value {
            Value::Counter(v) | Value::Gauge(v) | Value::Untyped(v) => Some(v),
            _ => None,
        };
        if let (Some(peer), Some(v)) = (peer, v) {
            let link = m.peers.entry(peer.to_owned()).or_default();
            match s.metric.as_str() {
                "etcd_network_active_peers" => link.active = Some(v),
                "etcd_network_disconnected_peers_total" => link.disconnected_total = Some(v),
                "etcd_network_peer_sent_failures_total" => link.sent_failures_total = Some(v),
                "etcd_network_peer_sent_bytes_total" => link.sent_bytes_total = Some(v),
                _ => {}
            }
        }
    }
    m.peers.retain(|_, l| *l != Default::default());
    m
}

/// Unlabelled sample value by name, from a plain scan of the whole page.
fn prometheus_full(text: &str) -> impl Fn(&str) -> Option<f64> + '_ {
    move |name: &str| {
        text.lines()
            .filter(|l| !l.starts_with('#'))
            .find_map(|l| l.strip_prefix(name).and_then(|r| r.strip_prefix(' ')))
            .and_then(|v| v.trim().parse().ok())
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]

    /// The probe feeds a page chunk by chunk as it arrives: wherever the chunks split it
    /// (inside a line, a name, a CRLF, or one byte at a time), the values are those of the
    /// whole page.
    #[test]
    fn a_page_fed_in_any_chunks_gives_the_whole_pages_values(
        cuts in proptest::collection::vec(0usize..170_000, 0..40),
        crlf in proptest::bool::ANY,
    ) {
        use leaderwatch::io::metrics::Extractor;
        let mut text = page("metrics-etcd-3.6.14-leader.txt");
        if crlf {
            text = text.replace('\n', "\r\n");
        }
        let bytes = text.as_bytes();
        let whole = extract(bytes);
        let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c % (bytes.len() + 1)).collect();
        cuts.sort_unstable();
        let mut e = Extractor::default();
        let mut at = 0;
        for c in cuts {
            e.feed(&bytes[at..c]);
            at = c;
        }
        e.feed(&bytes[at..]);
        proptest::prop_assert_eq!(e.finish(), whole);
    }
}

#[test]
fn a_page_fed_one_byte_at_a_time_gives_the_whole_pages_values() {
    for name in ["metrics-etcd-3.6.14.txt", "metrics-etcd-3.5.1.txt"] {
        let text = page(name);
        let mut e = leaderwatch::io::metrics::Extractor::default();
        for b in text.as_bytes().chunks(1) {
            e.feed(b);
        }
        let m = e.finish().expect("page");
        assert_eq!(Ok(m.clone()), extract(&text), "{name}");
        assert!(m.wal_fsync.is_some() && !m.peer_rtt.is_empty(), "{name}");
    }
}

#[test]
fn a_line_longer_than_any_of_etcds_is_skipped_not_kept() {
    let mut page = b"etcd_server_leader_changes_seen_total 2\n".to_vec();
    let long = format!("etcd_server_has_leader{{x=\"{}\"}} 1\n", "a".repeat(100_000));
    let mut e = leaderwatch::io::metrics::Extractor::default();
    e.feed(&page);
    for c in long.as_bytes().chunks(4096) {
        e.feed(c);
    }
    page.clear();
    e.feed(b"etcd_server_is_leader 1\n");
    let m = e.finish().expect("counter");
    assert_eq!(
        (m.leader_changes_seen_total, m.is_leader, m.has_leader),
        (Some(2.0), Some(true), None)
    );
}

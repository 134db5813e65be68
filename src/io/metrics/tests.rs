//! The extractor's unit tests: the page forms it must read, and the early decisions
//! that let it pass over unwanted families (kept apart: src/io/metrics.rs stays under ~700 lines).

use super::*;

#[test]
fn wanted_lines_between_unwanted_ones_are_all_read() {
    let page = b"grpc_x 1\netcd_server_is_leader 1\ngo_y 2\nprocess_start_time_seconds 5\ngrpc_z 1\netcd_server_has_leader 1\netcd_server_leader_changes_seen_total 3\n";
    let m = extract(page).unwrap();
    assert_eq!((m.is_leader, m.has_leader), (Some(true), Some(true)));
    assert_eq!(m.leader_changes_seen_total, Some(3.0));
    assert_eq!(m.process_start_time, Some(5.0));
}

#[test]
fn the_network_between_members_is_read_per_peer_in_both_label_forms() {
    let page = b"etcd_server_leader_changes_seen_total 1\n\
etcd_network_active_peers{Local=\"a1\",Remote=\"b2\"} 1\n\
etcd_network_active_peers{Local=\"a1\",Remote=\"c3\"} 0\n\
etcd_network_disconnected_peers_total{Local=\"a1\",Remote=\"c3\"} 2\n\
etcd_network_peer_sent_failures_total{To=\"c3\"} 17\n\
etcd_network_peer_sent_bytes_total{To=\"b2\"} 3269\n\
etcd_network_peer_sent_bytes_total{To=\"c3\",Other=\"x\"} 5\n\
process_cpu_seconds_total 12.5\n";
    let m = extract(&page[..]).unwrap();
    assert_eq!(m.process_cpu_seconds_total, Some(12.5));
    let link = |p: &str| m.peers.get(p).cloned().unwrap_or_default();
    assert_eq!(link("b2").active, Some(1.0));
    assert_eq!(link("b2").sent_bytes_total, Some(3269.0));
    assert_eq!(link("c3").active, Some(0.0));
    assert_eq!(link("c3").disconnected_total, Some(2.0));
    assert_eq!(link("c3").sent_failures_total, Some(17.0));
    // A label form etcd does not write is not guessed at.
    assert_eq!(link("c3").sent_bytes_total, None);
    assert_eq!(m.peers.len(), 2);
}

/// A page in etcd's form: every family announced by `# HELP` and `# TYPE`, one with a
/// `#` inside a label value, one a histogram whose stem is the announced name.
const TYPED: &[u8] = b"# HELP grpc_server_handled_total Calls.\n# TYPE grpc_server_handled_total counter\n\
grpc_server_handled_total{m=\"a#b\"} 1\ngrpc_server_handled_total{m=\"#c\"} 2\n\
# HELP go_x X.\n# TYPE go_x gauge\ngo_x 1\n\
# HELP etcd_server_health_failures F.\n# TYPE etcd_server_health_failures counter\netcd_server_health_failures 1\n\
# HELP etcd_server_is_leader 1 if leader.\n# TYPE etcd_server_is_leader gauge\netcd_server_is_leader 1\n\
# HELP etcd_disk_wal_fsync_duration_seconds Fsync.\n# TYPE etcd_disk_wal_fsync_duration_seconds histogram\n\
etcd_disk_wal_fsync_duration_seconds_bucket{le=\"+Inf\"} 4\netcd_disk_wal_fsync_duration_seconds_sum 0.5\n\
etcd_disk_wal_fsync_duration_seconds_count 4\n\
# HELP go_y Y.\n# TYPE go_y gauge\ngo_y 2\n\
# TYPE etcd_server_leader_changes_seen_total counter\netcd_server_leader_changes_seen_total 3\n";

#[test]
fn a_typed_pages_unwanted_families_are_passed_over_and_the_wanted_ones_read() {
    let m = extract(TYPED).unwrap();
    assert_eq!(m.is_leader, Some(true));
    assert_eq!(m.leader_changes_seen_total, Some(3.0));
    assert_eq!((m.wal_fsync_sum, m.wal_fsync_count), (Some(0.5), Some(4.0)));
    assert!(m.wal_fsync.is_some());
    // What passing over means: an unwanted family's samples run to the next comment.
    let mut hidden = TYPED.to_vec();
    let at = memchr::memmem::find(&hidden, b"go_y 2\n").unwrap() + 7;
    hidden.splice(at..at, b"etcd_server_has_leader 1\n".iter().copied());
    assert_eq!(extract(&hidden).unwrap().has_leader, None);
}

#[test]
fn comments_are_passed_over_unread_only_when_they_announce_a_family_that_cannot_be_wanted() {
    for unwanted in [
        &b"# HELP grpc_server_handled_total Calls."[..],
        b"# TYPE go_goroutines gauge",
        b"# TYPE etcd_server_health_failures counter",
    ] {
        assert!(announces_unwanted(unwanted), "{}", String::from_utf8_lossy(unwanted));
    }
    for other in [
        &b"# HELP etcd_server_is_leader 1 if leader."[..],
        b"# TYPE process_start_time_seconds gauge",
        b"# TYPE etcd_server_has_leader_x gauge", // its first sixteen bytes are a wanted name's
        b"# TYPE etcd_server_x gauge",            // too short to decide on sixteen
        b"# TYPE go_x gauge",                     // a short name: read whole
        b"# TYPE grpc_se",                        // too short to decide
        b"# some comment about grpc",
        b"#TYPE grpc_server_handled_total counter",
    ] {
        assert!(!announces_unwanted(other), "{}", String::from_utf8_lossy(other));
    }
}

/// The early decision on a comment's first bytes and the whole line's agree: on every
/// comment of every captured page, "unwanted" early is "unwanted" read whole.
#[test]
fn the_early_decision_agrees_with_reading_the_comment_whole_on_every_captured_page() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let mut decided = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if !path.file_name().unwrap().to_string_lossy().starts_with("metrics-") {
            continue;
        }
        let page = std::fs::read(&path).unwrap();
        for line in page.split(|&b| b == b'\n').filter(|l| l.first() == Some(&b'#')) {
            if announces_unwanted(line) {
                decided += 1;
                let name = announced(line).expect("an announcement");
                assert!(
                    !wanted_family(name),
                    "{}: {}",
                    path.display(),
                    String::from_utf8_lossy(line)
                );
            }
        }
    }
    assert!(decided > 100, "only {decided} comments decided early");
}

#[test]
fn a_typed_page_split_anywhere_in_two_gives_the_whole_pages_values() {
    let whole = extract(TYPED).unwrap();
    for at in 0..=TYPED.len() {
        let mut e = Extractor::default();
        e.feed(&TYPED[..at]);
        e.feed(&TYPED[at..]);
        assert_eq!(e.finish().unwrap(), whole, "split at {at}");
    }
}

#[test]
fn families_are_passed_over_only_when_no_wanted_name_can_be_theirs() {
    assert_eq!(
        announced(b"# TYPE etcd_server_is_leader gauge"),
        Some(&b"etcd_server_is_leader"[..])
    );
    assert_eq!(announced(b"# HELP go_x"), Some(&b"go_x"[..]));
    for other in [&b"# some comment"[..], b"# TYPE ", b"#TYPE x gauge", b"# EOF"] {
        assert_eq!(announced(other), None, "{}", String::from_utf8_lossy(other));
    }
    for wanted in
        [&b"etcd_server_is_leader"[..], b"etcd_disk_wal_fsync_duration_seconds", b"etcd_server"]
    {
        assert!(wanted_family(wanted), "{}", String::from_utf8_lossy(wanted));
    }
    for unwanted in
        [&b"etcd_server_is_leader_x"[..], b"etcd_server_is_lead", b"grpc_server_handled_total"]
    {
        assert!(!wanted_family(unwanted), "{}", String::from_utf8_lossy(unwanted));
    }
}

#[test]
fn family_reads_wanted_sample_lines_only() {
    let plain = |l: &'static [u8]| match family(l) {
        Some((Family::Plain(i), rest)) => Some((WANTED[i], rest)),
        _ => None,
    };
    assert_eq!(plain(b"etcd_server_has_leader 1"), Some((HAS_LEADER, &b" 1"[..])));
    assert_eq!(plain(b"etcd_server_is_leader\t0"), Some((IS_LEADER, &b"\t0"[..])));
    assert!(matches!(
        family(b"etcd_network_peer_round_trip_time_seconds_bucket{le=\"1\"} 2"),
        Some((Family::Bucket(2), _))
    ));
    for other in [
        &b"# TYPE etcd_server_is_leader gauge"[..],
        b"etcd_server_is_leader_x 1",
        b"etcd_server_is_leader",
        b"etcd_ser",
        b"go_goroutines 12",
        b"x{a=\"b\"} 2",
    ] {
        assert!(family(other).is_none(), "{}", String::from_utf8_lossy(other));
    }
}

#[test]
fn crlf_lines_and_bytes_that_are_not_utf8_elsewhere_do_not_matter() {
    let mut page = b"# \xff\xfe not UTF-8\r\ngo_x{a=\"\xff\"} 1\r\n".to_vec();
    page.extend_from_slice(b"# HELP go_y \xff\r\n# TYPE go_y gauge\r\ngo_y 1\r\n");
    page.extend_from_slice(b"# TYPE etcd_server_leader_changes_seen_total counter\r\n");
    page.extend_from_slice(
        b"etcd_server_leader_changes_seen_total 3\r\netcd_server_is_leader 1\r\n",
    );
    page.extend_from_slice(b"etcd_disk_wal_fsync_duration_seconds_bucket{le=\"0.001\"} 5\r\n");
    page.extend_from_slice(b"etcd_disk_wal_fsync_duration_seconds_bucket{le=\"+Inf\"} 6\r\n");
    page.extend_from_slice(b"etcd_server_has_leader \xff1\n"); // a wanted line, not UTF-8: skipped
    let m = extract(&page).expect("page has the counter");
    assert_eq!(m.leader_changes_seen_total, Some(3.0));
    assert_eq!(m.is_leader, Some(true));
    assert_eq!(m.has_leader, None);
    assert!(m.wal_fsync.is_some());
}

#[test]
fn bucket_lines_in_etcds_forms_only() {
    assert_eq!(bucket_line(br#"{le="0.001"} 12"#), Some((&b""[..], 0.001, 12.0)));
    assert_eq!(
        bucket_line(br#"{To="ab12", le="+Inf"} 3 1700000000000"#),
        Some((&b"ab12"[..], f64::INFINITY, 3.0))
    );
    for bad in [
        &br#"{le=0.1} 1"#[..],
        br#"{le="a"} 1"#,
        br#"{le="1"} NaN"#,
        br#"{le="1"} -1"#,
        br#"{le="1"}"#,
        br#"{other="1",le="1"} 1"#,
        b"{le=\"1\"",
        br#"{To="p"} 1"#,
        br#" 1"#,
    ] {
        assert_eq!(bucket_line(bad), None, "{}", String::from_utf8_lossy(bad));
    }
}

#[test]
fn plain_values_in_the_forms_a_page_writes() {
    assert_eq!(plain_value(b" 1"), Some(1.0));
    assert_eq!(plain_value(b"{} 2.5e3 1700000000000"), Some(2500.0));
    assert_eq!(plain_value(b"\t+Inf"), Some(f64::INFINITY));
    assert_eq!(plain_value(b" -Inf"), Some(f64::NEG_INFINITY));
    assert!(plain_value(b" NaN").is_some_and(f64::is_nan));
    assert_eq!(plain_value(b" 0"), Some(0.0));
    assert_eq!(plain_value(b" 999999999999999"), Some(999_999_999_999_999.0));
    assert_eq!(plain_value(b" 12345678901234567"), Some(12_345_678_901_234_567.0));
    assert_eq!(plain_value(b" 007"), Some(7.0));
    for bad in [&b"{a=\"b\"} 1"[..], b"", b" ", b" one", b" \xff1"] {
        assert_eq!(plain_value(bad), None, "{}", String::from_utf8_lossy(bad));
    }
}

#[test]
fn garbage_is_an_error_not_a_panic() {
    assert_eq!(extract("\u{0}\u{1}garbage {{{ 12"), Err(MetricsError::NoLeaderChanges));
    assert_eq!(extract(""), Err(MetricsError::NoLeaderChanges));
}

#[test]
fn labelled_and_non_finite_samples_are_ignored() {
    let page = "etcd_server_leader_changes_seen_total{x=\"y\"} 9\n\
                etcd_server_leader_changes_seen_total 2\n\
                etcd_server_has_leader NaN\n";
    let m = extract(page).expect("page has the counter");
    assert_eq!(m.leader_changes_seen_total, Some(2.0));
    assert_eq!(m.has_leader, None);
}

//! `probe::parse_health` on real `/health` answers captured with `curl -i` from etcd 3.6.14
//! (what the suite and the deployment run), and, as parser-regression fixtures, from etcd
//! 3.5.1 and Debian's 3.4.23 (tests/fixtures/README.md says how each was captured).

use leaderwatch::io::probe::parse_health;
use leaderwatch::model::observation::Health;

fn fixture(name: &str) -> String {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// One `curl -s -i` answer: the status line's code and the body after the CRLF blank line.
fn response(raw: &str) -> (u16, &str) {
    let (head, body) =
        raw.split_once("\r\n\r\n").unwrap_or_else(|| panic!("no header/body split in {raw:?}"));
    let status = head.lines().next().unwrap_or_default();
    let code = status
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("not an HTTP status line: {status:?}"));
    (code, body)
}

/// A captured answer, as the prober reads it (status code and body bytes).
fn parsed(raw: &str) -> (u16, Health) {
    let (code, body) = response(raw);
    let h = parse_health(code, body.as_bytes()).unwrap_or_else(|e| panic!("{e}: {raw:?}"));
    (code, h)
}

fn healthy() -> Health {
    Health { healthy: true, reason: String::new() }
}

fn no_leader() -> Health {
    Health { healthy: false, reason: "RAFT NO LEADER".into() }
}

#[test]
fn etcd_3_6_14_healthy_member() {
    assert_eq!(parsed(&fixture("health-etcd-3.6.14.json")), (200, healthy()));
}

#[test]
fn etcd_3_6_14_survivor_without_leader_503_but_serializable_true_200() {
    let text = fixture("health-etcd-3.6.14-noleader.txt");
    let (plain, serializable) =
        text.split_once("\n--- serializable=true ---\n").expect("two answers");
    // The 503 body already ends with a newline; the capture's echo adds one more.
    assert_eq!(parsed(plain.trim_end_matches('\n')), (503, no_leader()));
    // Member-local health (etcd 3.5.3+): no "RAFT NO LEADER" check. curl -s without -i: the
    // status line is not in the file; liveness-path.txt below has it (200).
    let body = serializable.trim();
    assert_eq!(parse_health(200, body.as_bytes()), Ok(healthy()), "{body:?}");
}

/// The StatefulSet's liveness path, `/health?serializable=true&exclude=NOSPACE`, on a
/// healthy member and on the survivor of a lost quorum: 200 both times.
#[test]
fn etcd_3_6_14_liveness_path_with_and_without_quorum() {
    let text = fixture("health-etcd-3.6.14-liveness-path.txt");
    let (with_quorum, without) = text.split_once("\n--- no leader ---\n").expect("two answers");
    assert_eq!(parsed(with_quorum), (200, healthy()));
    assert_eq!(parsed(without), (200, healthy()));
}

#[test]
fn etcd_3_5_1_healthy_member_and_survivor_without_leader() {
    assert_eq!(parsed(&fixture("health-etcd-3.5.1.json")), (200, healthy()));
    let text = fixture("health-etcd-3.5.1-noleader.txt");
    let (plain, serializable) =
        text.split_once("\n--- serializable=true ---\n").expect("two answers");
    assert_eq!(parsed(plain.trim_end_matches('\n')), (503, no_leader()));
    // 3.5.1 predates member-local health: serializable=true still says no leader (a body
    // that says false comes only with a 503; the status line is not in the file).
    assert_eq!(parse_health(503, serializable.trim().as_bytes()), Ok(no_leader()));
}

#[test]
fn etcd_3_4_23_healthy_member_has_no_reason() {
    let raw = fixture("health-etcd-3.4.23.json");
    assert_eq!(parsed(&raw), (200, healthy()));
    let (_, body) = response(&raw);
    assert!(!body.contains("reason"), "3.4 has no reason field: {body}");
}

/// The captures are not rewritten in passing: each 200 body is exactly what etcd sent
/// (its Content-Length), with no trailing newline added.
#[test]
fn captured_bodies_match_their_content_length() {
    for name in ["health-etcd-3.6.14.json", "health-etcd-3.5.1.json", "health-etcd-3.4.23.json"] {
        let raw = fixture(name);
        let (head, body) = raw.split_once("\r\n\r\n").expect("split");
        let len: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("Content-Length: "))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("{name}: Content-Length"));
        assert_eq!(body.len(), len, "{name}");
    }
}

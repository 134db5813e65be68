//! `/metrics` text -> the few values leaderwatch needs, behind one function: [`extract`].
//!
//! A full etcd page is ~170 KB and ~1,700 lines in ~130 families, of which about eighty
//! lines are wanted. A family none of whose names is wanted is passed over whole, from the
//! `# HELP` or `# TYPE` line that announces it to the next comment line, by one search for
//! `#`: etcd's client library announces every family, so a family's samples end there
//! (samples after them with no comment line of their own would be passed over too).
//! Other lines are filtered by metric name, and only the wanted ones parsed: the thirteen
//! unlabelled values, the three health histograms and rafthttp's four values per peer
//! (the network between members), each by the few lines of code their
//! fixed form needs (a general parser, prometheus-parse, was slower and its code stayed
//! resident in every sampler; the fixtures' tests still compare against it).

use crate::model::metrics::{Histogram, MemberMetrics};

const LEADER_CHANGES: &str = "etcd_server_leader_changes_seen_total";
const HAS_LEADER: &str = "etcd_server_has_leader";
const IS_LEADER: &str = "etcd_server_is_leader";
const PROCESS_START: &str = "process_start_time_seconds";
const HEARTBEAT_FAILURES: &str = "etcd_server_heartbeat_send_failures_total";
const SLOW_APPLY: &str = "etcd_server_slow_apply_total";
const WAL_FSYNC_SUM: &str = "etcd_disk_wal_fsync_duration_seconds_sum";
const WAL_FSYNC_COUNT: &str = "etcd_disk_wal_fsync_duration_seconds_count";
const PROPOSALS_FAILED: &str = "etcd_server_proposals_failed_total";
const SLOW_READ_INDEXES: &str = "etcd_server_slow_read_indexes_total";
const DB_SIZE: &str = "etcd_mvcc_db_total_size_in_bytes";
const QUOTA: &str = "etcd_server_quota_backend_bytes";
const WAL_FSYNC_BUCKET: &str = "etcd_disk_wal_fsync_duration_seconds_bucket";
const BACKEND_COMMIT_BUCKET: &str = "etcd_disk_backend_commit_duration_seconds_bucket";
const PEER_RTT_BUCKET: &str = "etcd_network_peer_round_trip_time_seconds_bucket";
const PROCESS_CPU: &str = "process_cpu_seconds_total";
const ACTIVE_PEERS: &str = "etcd_network_active_peers";
const DISCONNECTED_PEERS: &str = "etcd_network_disconnected_peers_total";
const PEER_SENT_FAILURES: &str = "etcd_network_peer_sent_failures_total";
const PEER_SENT_BYTES: &str = "etcd_network_peer_sent_bytes_total";

/// Every unlabelled sample name [`extract`] reads. Anything else is skipped before parsing.
const WANTED: [&str; 13] = [
    LEADER_CHANGES,
    HAS_LEADER,
    IS_LEADER,
    PROCESS_START,
    HEARTBEAT_FAILURES,
    SLOW_APPLY,
    WAL_FSYNC_SUM,
    WAL_FSYNC_COUNT,
    PROPOSALS_FAILED,
    SLOW_READ_INDEXES,
    DB_SIZE,
    QUOTA,
    PROCESS_CPU,
];

/// The histograms behind member health, read by [`bucket_line`].
const BUCKETS: [&str; 3] = [WAL_FSYNC_BUCKET, BACKEND_COMMIT_BUCKET, PEER_RTT_BUCKET];

/// The values etcd gives per peer (label `To`, or `Remote` beside `Local`), read by
/// [`peer_line`].
const PER_PEER: [&str; 4] = [ACTIVE_PEERS, DISCONNECTED_PEERS, PEER_SENT_FAILURES, PEER_SENT_BYTES];

/// What a wanted line carries: an unlabelled value (its place in [`WANTED`]), a bucket of
/// a histogram (its place in [`BUCKETS`]) or a value per peer (its place in [`PER_PEER`]).
#[derive(Debug, Clone, Copy)]
enum Family {
    Plain(usize),
    Bucket(usize),
    Peer(usize),
}

/// Every wanted name with its family and its first eight bytes as one word: a page's
/// ~1,700 lines are mostly other families, and one word compare each turns them away
/// (scanning every line's name byte by byte was a third of a full round's instructions).
const FAMILIES: [(&str, Family, u64); WANTED.len() + BUCKETS.len() + PER_PEER.len()] = {
    let mut t = [("", Family::Plain(0), 0); WANTED.len() + BUCKETS.len() + PER_PEER.len()];
    let mut i = 0;
    while i < WANTED.len() {
        t[i] = (WANTED[i], Family::Plain(i), head(WANTED[i].as_bytes()));
        i += 1;
    }
    while i < WANTED.len() + BUCKETS.len() {
        let b = i - WANTED.len();
        t[i] = (BUCKETS[b], Family::Bucket(b), head(BUCKETS[b].as_bytes()));
        i += 1;
    }
    while i < t.len() {
        let p = i - WANTED.len() - BUCKETS.len();
        t[i] = (PER_PEER[p], Family::Peer(p), head(PER_PEER[p].as_bytes()));
        i += 1;
    }
    t
};

/// The first eight bytes of a name or line as one word (every wanted name is longer).
const fn head(b: &[u8]) -> u64 {
    u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]])
}

// Every wanted name is longer than the sixteen bytes `announces_unwanted` compares.
const _: () = {
    let mut i = 0;
    while i < FAMILIES.len() {
        assert!(FAMILIES[i].0.len() > 16);
        i += 1;
    }
};

/// The distinct first words of the wanted names (five), the first test every line meets.
const HEADS: [u64; distinct_heads()] = {
    let mut t = [0; distinct_heads()];
    let (mut i, mut n) = (0, 0);
    while i < FAMILIES.len() {
        if first_with_head(i) {
            t[n] = FAMILIES[i].2;
            n += 1;
        }
        i += 1;
    }
    t
};

const fn distinct_heads() -> usize {
    let (mut i, mut n) = (0, 0);
    while i < FAMILIES.len() {
        if first_with_head(i) {
            n += 1;
        }
        i += 1;
    }
    n
}

/// Is `FAMILIES[i]` the first with its head?
const fn first_with_head(i: usize) -> bool {
    let mut j = 0;
    while j < i {
        if FAMILIES[j].2 == FAMILIES[i].2 {
            return false;
        }
        j += 1;
    }
    true
}

/// The wanted family a sample line belongs to, and the rest of the line after its name;
/// `None` for comments and every other family.
fn family(line: &[u8]) -> Option<(Family, &[u8])> {
    let h = head(line.get(..8)?);
    if !HEADS.contains(&h) {
        return None;
    }
    FAMILIES.iter().find_map(|&(name, f, fh)| {
        let n = name.len();
        let wanted = fh == h
            && matches!(line.get(n), Some(b'{' | b' ' | b'\t'))
            && line[8..n] == name.as_bytes()[8..];
        wanted.then(|| (f, &line[n..]))
    })
}

/// The family a `# HELP` or `# TYPE` line announces; `None` for any other comment.
fn announced(line: &[u8]) -> Option<&[u8]> {
    let rest = line.strip_prefix(b"# HELP ").or_else(|| line.strip_prefix(b"# TYPE "))?;
    let rest = rest.trim_ascii_start();
    let end = memchr::memchr2(b' ', b'\t', rest).unwrap_or(rest.len());
    (end > 0).then_some(&rest[..end])
}

/// Does a comment line, of which `start` is the beginning, announce a family that is not
/// wanted? Decided on its first 15 or 23 bytes, without finding the line's end, for the
/// families whose name's first 8 or 16 bytes no wanted name starts with (every wanted name
/// is longer); `false` for the rest, which [`Extractor::line`] reads whole.
fn announces_unwanted(start: &[u8]) -> bool {
    let Some(b) = start.get(..15) else { return false };
    if !(b.starts_with(b"# HELP ") || b.starts_with(b"# TYPE "))
        || b[7..].iter().any(u8::is_ascii_whitespace)
    {
        return false;
    }
    if !HEADS.contains(&head(&b[7..])) {
        return true;
    }
    // A name that starts as a wanted one does (`etcd_server_...`): decided on sixteen bytes.
    let Some(b) = start.get(..23) else { return false };
    !b[15..].iter().any(u8::is_ascii_whitespace)
        && !FAMILIES.iter().any(|&(name, ..)| name.as_bytes()[..16] == b[7..])
}

/// May a family's samples hold a wanted line? Its name is a wanted name or the stem of one
/// (`x` for `x_bucket`, `x_sum`, `x_total`); a family in doubt is read line by line.
fn wanted_family(name: &[u8]) -> bool {
    if name.len() >= 8 && !HEADS.contains(&head(name)) {
        return false; // most families, turned away by one word as sample lines are
    }
    FAMILIES.iter().any(|(wanted, ..)| {
        let wanted = wanted.as_bytes();
        matches!(wanted.get(name.len()), None | Some(b'_')) && wanted.starts_with(name)
    })
}

/// Why a page yielded nothing useful.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum MetricsError {
    #[error("/metrics has no {LEADER_CHANGES} sample (not an etcd metrics page?)")]
    NoLeaderChanges,
}

/// Reduces a whole Prometheus text page to [`MemberMetrics`]: [`Extractor`] fed at once.
pub fn extract(page: impl AsRef<[u8]>) -> Result<MemberMetrics, MetricsError> {
    let mut e = Extractor::default();
    e.feed(page.as_ref());
    e.finish()
}

/// Longest line kept across two chunks; longer lines are not etcd's and are skipped.
const MAX_LINE: usize = 64 * 1024;

/// Reads a page as it arrives, chunk by chunk, keeping only the wanted lines: the probe
/// never holds the ~160 KB page, and nothing is copied but those lines. The one entry
/// point for metrics parsing: callers never see prometheus-parse.
///
/// Works on raw bytes: at most ~100 of a page's ~1,700 lines are wanted, so only those are
/// checked as UTF-8 and parsed (validating and splitting the whole page as text was a
/// quarter of a full round's CPU). A wanted line that is not UTF-8 is skipped, as the
/// parser would skip it.
#[derive(Debug, Default)]
pub struct Extractor {
    /// The unfinished last line of the chunks so far, when it may be wanted.
    partial: Vec<u8>,
    /// The unfinished last line is not wanted (or too long): drop bytes up to its end.
    skipping: bool,
    /// In the samples of a family with no wanted line: drop bytes up to the next comment.
    in_unwanted_family: bool,
    /// The last byte passed over ended a line, so a `#` first in the next chunk starts one.
    at_line_start: bool,
    /// The bucket lines so far, one entry per histogram, in page order.
    buckets: Vec<Buckets>,
    /// The unlabelled values, by their place in [`WANTED`]; a later line wins.
    wanted: [Option<f64>; WANTED.len()],
    /// The per-peer values as read: (place in [`PER_PEER`], peer, value).
    per_peer: Vec<(usize, String, f64)>,
}

/// One histogram's bucket lines: its place in [`BUCKETS`], its peer ("" for none), and
/// its (bound, count) pairs as read. Found by a scan: a page has at most a handful.
#[derive(Debug)]
struct Buckets {
    family: usize,
    peer: String,
    counts: Vec<(f64, f64)>,
}

impl Extractor {
    /// The next bytes of the page, split anywhere.
    pub fn feed(&mut self, mut chunk: &[u8]) {
        'chunk: loop {
            if self.in_unwanted_family {
                let Some(i) = self.next_comment(chunk) else { return };
                self.in_unwanted_family = false;
                chunk = &chunk[i..];
            }
            if self.skipping || !self.partial.is_empty() {
                let Some(i) = memchr::memchr(b'\n', chunk) else {
                    self.hold(chunk);
                    return;
                };
                self.hold(&chunk[..i]);
                chunk = &chunk[i + 1..];
                if !std::mem::take(&mut self.skipping) {
                    let line = std::mem::take(&mut self.partial);
                    let unwanted = self.line(&line);
                    self.partial = line; // keep the allocation for the next split line
                    self.partial.clear();
                    if unwanted {
                        self.skip_family();
                        continue 'chunk;
                    }
                }
            }
            let mut start = 0;
            while let Some(i) = memchr::memchr(b'\n', &chunk[start..]) {
                let unwanted = self.line(&chunk[start..start + i]);
                start += i + 1;
                if unwanted {
                    self.skip_family();
                    chunk = &chunk[start..];
                    continue 'chunk;
                }
            }
            self.hold(&chunk[start..]);
            return;
        }
    }

    /// Passes over the samples of a family none of whose lines is wanted: they run to the
    /// next comment line, as every family of a page that types its families does (etcd's
    /// client library writes `# HELP` and `# TYPE` before each one).
    fn skip_family(&mut self) {
        self.in_unwanted_family = true;
        self.at_line_start = true;
    }

    /// Where the next comment line that may matter begins in `chunk`, if it does: one search
    /// for `#`, which a family's sample lines hardly ever hold, instead of one per line.
    /// Comments that announce another unwanted family are passed over on the way.
    fn next_comment(&mut self, chunk: &[u8]) -> Option<usize> {
        let mut from = 0;
        while let Some(i) = memchr::memchr(b'#', &chunk[from..]) {
            let i = from + i;
            let line_start = if i == 0 { self.at_line_start } else { chunk[i - 1] == b'\n' };
            if line_start && !announces_unwanted(&chunk[i..]) {
                return Some(i);
            }
            from = i + 1;
        }
        if let Some(&last) = chunk.last() {
            self.at_line_start = last == b'\n';
        }
        None
    }

    /// Keeps the start of an unfinished line if it may be wanted.
    fn hold(&mut self, bytes: &[u8]) {
        if self.skipping || bytes.is_empty() {
            return;
        }
        let first = self.partial.first().or(bytes.first()).copied();
        if !(first == Some(b'#') || FAMILIES.iter().any(|f| Some(f.0.as_bytes()[0]) == first))
            || self.partial.len() + bytes.len() > MAX_LINE
        {
            self.partial.clear();
            self.skipping = true;
            return;
        }
        self.partial.extend_from_slice(bytes);
    }

    /// One complete line (without its newline); true when it names a family none of whose
    /// samples is wanted, so the lines up to the next comment can be passed over.
    fn line(&mut self, line: &[u8]) -> bool {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.first() == Some(&b'#') {
            return announced(line).is_some_and(|name| !wanted_family(name));
        }
        match family(line) {
            Some((Family::Plain(i), rest)) => {
                if let Some(v) = plain_value(rest) {
                    self.wanted[i] = Some(v);
                }
            }
            Some((Family::Bucket(b), rest)) => {
                let Some((peer, le, v)) = bucket_line(rest) else { return false };
                match self.buckets.iter_mut().find(|h| h.family == b && h.peer.as_bytes() == peer) {
                    Some(h) => h.counts.push((le, v)),
                    None => {
                        let Ok(peer) = std::str::from_utf8(peer) else { return false };
                        self.buckets.push(Buckets {
                            family: b,
                            peer: peer.to_owned(),
                            counts: vec![(le, v)],
                        });
                    }
                }
            }
            Some((Family::Peer(i), rest)) => {
                if let Some((peer, v)) = peer_line(rest)
                    && let Ok(peer) = std::str::from_utf8(peer)
                {
                    self.per_peer.push((i, peer.to_owned(), v));
                }
            }
            None => {}
        }
        false
    }

    /// The values of the page fed so far (its last line need not end in a newline).
    pub fn finish(mut self) -> Result<MemberMetrics, MetricsError> {
        if !self.skipping && !self.partial.is_empty() {
            let line = std::mem::take(&mut self.partial);
            self.line(&line);
        }
        let mut m = MemberMetrics::default();
        for Buckets { family, peer, counts } in self.buckets {
            let h = Histogram::new(counts);
            match BUCKETS[family] {
                WAL_FSYNC_BUCKET => m.wal_fsync = Some(h),
                BACKEND_COMMIT_BUCKET => m.backend_commit = Some(h),
                _ if !peer.is_empty() => {
                    m.peer_rtt.insert(peer, h);
                }
                _ => {}
            }
        }
        for (name, v) in WANTED.iter().zip(self.wanted) {
            let Some(v) = v.filter(|v| v.is_finite()) else { continue };
            match *name {
                LEADER_CHANGES => m.leader_changes_seen_total = Some(v),
                HAS_LEADER => m.has_leader = Some(v != 0.0),
                IS_LEADER => m.is_leader = Some(v != 0.0),
                PROCESS_START => m.process_start_time = Some(v),
                HEARTBEAT_FAILURES => m.heartbeat_send_failures_total = Some(v),
                SLOW_APPLY => m.slow_apply_total = Some(v),
                WAL_FSYNC_SUM => m.wal_fsync_sum = Some(v),
                WAL_FSYNC_COUNT => m.wal_fsync_count = Some(v),
                PROPOSALS_FAILED => m.proposals_failed_total = Some(v),
                SLOW_READ_INDEXES => m.slow_read_indexes_total = Some(v),
                DB_SIZE => m.db_total_size_bytes = Some(v),
                QUOTA => m.quota_backend_bytes = Some(v),
                PROCESS_CPU => m.process_cpu_seconds_total = Some(v),
                _ => {}
            }
        }
        for (i, peer, v) in self.per_peer {
            let link = m.peers.entry(peer).or_default();
            let slot = match PER_PEER[i] {
                ACTIVE_PEERS => &mut link.active,
                DISCONNECTED_PEERS => &mut link.disconnected_total,
                PEER_SENT_FAILURES => &mut link.sent_failures_total,
                _ => &mut link.sent_bytes_total,
            };
            *slot = Some(v);
        }
        if m.leader_changes_seen_total.is_none() {
            return Err(MetricsError::NoLeaderChanges);
        }
        Ok(m)
    }
}

/// A bucket line after its name, `{[To="<peer>",]le="<bound>"} <count>` -> (peer or "",
/// bound, count). Only the label forms etcd writes for these families; anything else is `None`.
fn bucket_line(rest: &[u8]) -> Option<(&[u8], f64, f64)> {
    let rest = rest.strip_prefix(b"{")?;
    let end = memchr::memchr(b'}', rest)?;
    let (labels, value) = (&rest[..end], &rest[end + 1..]);
    let (mut peer, mut le) = (&b""[..], None);
    for pair in labels.split(|&b| b == b',').filter(|p| !p.trim_ascii().is_empty()) {
        let eq = memchr::memchr(b'=', pair)?;
        let v = pair[eq + 1..].trim_ascii().strip_prefix(b"\"")?.strip_suffix(b"\"")?;
        match pair[..eq].trim_ascii() {
            b"le" => le = Some(number(v)?),
            b"To" => peer = v,
            _ => return None,
        }
    }
    let count = number(first_field(value)?)?;
    (count.is_finite() && count >= 0.0).then_some((peer, le?, count))
}

/// A per-peer sample after its name, `{To="<peer>"} <value>` or
/// `{Local="<me>",Remote="<peer>"} <value>` -> (peer, value). Other label forms are `None`.
fn peer_line(rest: &[u8]) -> Option<(&[u8], f64)> {
    let rest = rest.strip_prefix(b"{")?;
    let end = memchr::memchr(b'}', rest)?;
    let (labels, value) = (&rest[..end], &rest[end + 1..]);
    let mut peer = None;
    for pair in labels.split(|&b| b == b',').filter(|p| !p.trim_ascii().is_empty()) {
        let eq = memchr::memchr(b'=', pair)?;
        let v = pair[eq + 1..].trim_ascii().strip_prefix(b"\"")?.strip_suffix(b"\"")?;
        match pair[..eq].trim_ascii() {
            b"To" | b"Remote" => peer = Some(v),
            b"Local" => {}
            _ => return None,
        }
    }
    let v = number(first_field(value)?)?;
    (v.is_finite() && v >= 0.0).then_some((peer.filter(|p| !p.is_empty())?, v))
}

/// An unlabelled sample after its name, `[{}] <value>[ <timestamp>]` -> its value. Labels
/// mean `None`: etcd exports the wanted families without them.
fn plain_value(rest: &[u8]) -> Option<f64> {
    let rest = rest.strip_prefix(b"{}").unwrap_or(rest);
    if rest.first() == Some(&b'{') {
        return None;
    }
    number(first_field(rest)?)
}

/// The first whitespace-separated field.
fn first_field(s: &[u8]) -> Option<&[u8]> {
    let s = s.trim_ascii_start();
    let end = s.iter().position(u8::is_ascii_whitespace).unwrap_or(s.len());
    (end > 0).then_some(&s[..end])
}

/// A sample value as the text format writes it (`+Inf`, `-Inf`, `NaN` or a float).
fn number(b: &[u8]) -> Option<f64> {
    match b {
        b"+Inf" => Some(f64::INFINITY),
        b"-Inf" => Some(f64::NEG_INFINITY),
        // Counts are whole numbers: summed digit by digit, exact below 10^15 (< 2^53),
        // without the general parser's cost.
        _ if (1..=15).contains(&b.len()) && b.iter().all(u8::is_ascii_digit) => {
            Some(b.iter().fold(0u64, |n, d| n * 10 + u64::from(d - b'0')) as f64)
        }
        _ => std::str::from_utf8(b).ok()?.parse().ok(),
    }
}

#[cfg(test)]
mod tests;

//! `LocalCluster`: N real etcd members on free 127.0.0.1 ports, started from an etcd
//! binary, for `rehearse` and for the tests. It can SIGKILL, SIGTERM, SIGSTOP/SIGCONT and
//! restart a member with its data dir, and it always cleans up (Drop kills what is left).

use std::fs::File;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use crate::io::http::exchange::Http1Conn;
use crate::io::http::tls::TlsConfig;
use crate::io::metrics;
use crate::io::probe::{ProbeConfig, TlsFiles, http_tls};
use crate::model::member::{Member, MemberName};

#[derive(Debug, thiserror::Error)]
pub enum LocalError {
    /// None given, none in ETCD_BIN, .tools/bin or PATH. The command adds its flag (lib.rs).
    #[error(
        "no etcd binary found: set ETCD_BIN, run `make deps` (installs .tools/bin/etcd), or put etcd on PATH"
    )]
    NoEtcd,
    #[error("etcd binary {0}: not an executable file")]
    NotExecutable(PathBuf),
    #[error("{what}: {source}")]
    Io { what: String, source: std::io::Error },
    #[error("local cluster did not become healthy within {timeout:?}; member logs are in {logs}")]
    NotHealthy { timeout: Duration, logs: String },
    #[error("member {0} does not exist")]
    NoMember(usize),
    #[error("member {0} is {1}")]
    State(usize, &'static str),
}

type Result<T> = std::result::Result<T, LocalError>;

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> LocalError {
    let what = what.into();
    move |source| LocalError::Io { what, source }
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    p.metadata().is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// The etcd binary: `explicit` (--etcd-bin), then `ETCD_BIN`, then `.tools/bin/etcd` in
/// the working directory, then `PATH`. Never silently absent. (No path of the build tree:
/// the Makefile exports `ETCD_BIN`, and the tests run in the repository.)
pub fn find_etcd(explicit: Option<&Path>) -> Result<PathBuf> {
    let env = std::env::var_os("ETCD_BIN").filter(|v| !v.is_empty()).map(PathBuf::from);
    if let Some(p) = explicit.map(Path::to_path_buf).or(env) {
        let p = std::fs::canonicalize(&p).unwrap_or(p);
        return if is_executable(&p) { Ok(p) } else { Err(LocalError::NotExecutable(p)) };
    }
    let candidates = [PathBuf::from(".tools/bin/etcd")];
    let on_path = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).map(|d| d.join("etcd")).collect::<Vec<_>>())
        .unwrap_or_default();
    candidates
        .into_iter()
        .chain(on_path)
        .find(|p| is_executable(p))
        .map(|p| std::fs::canonicalize(&p).unwrap_or(p))
        .ok_or(LocalError::NoEtcd)
}

/// What a member process is doing, as far as the cluster knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemberState {
    Running,
    Frozen,
    Stopped,
}

struct LocalMember {
    name: String,
    /// `https` when the cluster serves clients over TLS.
    scheme: &'static str,
    client_port: u16,
    peer_port: u16,
    data_dir: PathBuf,
    log: PathBuf,
    child: Option<Child>,
    frozen: bool,
}

impl LocalMember {
    fn client_url(&self) -> String {
        format!("{}://127.0.0.1:{}", self.scheme, self.client_port)
    }
    fn peer_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.peer_port)
    }
}

/// etcd's own defaults, which the local members are given explicitly.
pub const DEFAULT_HEARTBEAT_MS: u64 = 100;
pub const DEFAULT_ELECTION_MS: u64 = 1000;

/// Options for [`LocalCluster::start`].
#[derive(Debug, Clone)]
pub struct LocalOptions {
    pub members: usize,
    /// Passed to every member as --heartbeat-interval and --election-timeout, so that the
    /// baseline can say where its timing came from.
    pub heartbeat_ms: u64,
    pub election_ms: u64,
    pub etcd_bin: Option<PathBuf>,
    /// Time allowed for all members to report healthy.
    pub startup_timeout: Duration,
    /// Serve clients over TLS with client-certificate auth: `cacert` is trusted for
    /// clients, `cert`/`key` are the server's (and may serve as the client's too).
    pub tls: Option<TlsFiles>,
}

impl Default for LocalOptions {
    fn default() -> Self {
        LocalOptions {
            members: 3,
            etcd_bin: None,
            startup_timeout: Duration::from_secs(30),
            tls: None,
            heartbeat_ms: DEFAULT_HEARTBEAT_MS,
            election_ms: DEFAULT_ELECTION_MS,
        }
    }
}

/// A running local etcd cluster. Dropping it kills every member and removes its data.
pub struct LocalCluster {
    bin: PathBuf,
    token: String,
    /// --heartbeat-interval and --election-timeout of every member, in ms.
    timing: (u64, u64),
    tls: Option<TlsFiles>,
    members: Vec<LocalMember>,
    /// The TLS client settings of its own checks (the prober's), when it serves TLS.
    http_tls: Option<TlsConfig>,
    // Last field: removed after the members are killed in Drop.
    dir: tempfile::TempDir,
}

/// Free loopback ports, all bound at once so that they are distinct.
fn free_ports(n: usize) -> Result<Vec<u16>> {
    let listeners = (0..n)
        .map(|_| TcpListener::bind("127.0.0.1:0"))
        .collect::<std::io::Result<Vec<_>>>()
        .map_err(io("bind a free 127.0.0.1 port"))?;
    listeners
        .iter()
        .map(|l| l.local_addr().map(|a| a.port()))
        .collect::<std::io::Result<Vec<_>>>()
        .map_err(io("read a bound port"))
}

impl LocalCluster {
    /// Starts the members and waits until every one answers `/health` true. Ports are
    /// chosen free; if another process takes one in between, it starts again on new ones.
    pub async fn start(opts: LocalOptions) -> Result<Self> {
        let bin = find_etcd(opts.etcd_bin.as_deref())?;
        let mut last = None;
        for _attempt in 0..3 {
            let mut c = Self::spawn_all(
                &bin,
                opts.members,
                opts.tls.clone(),
                (opts.heartbeat_ms, opts.election_ms),
            )?;
            match c.wait_healthy(opts.startup_timeout).await {
                Ok(()) => return Ok(c),
                Err(e) => {
                    let clash = c.logs_contain("address already in use");
                    last = Some(e);
                    if !clash {
                        // Keep the logs for the error message's reader.
                        let kept = c.dir.path().to_path_buf();
                        c.kill_all();
                        c.dir.disable_cleanup(true);
                        return Err(LocalError::NotHealthy {
                            timeout: opts.startup_timeout,
                            logs: kept.display().to_string(),
                        });
                    }
                }
            }
        }
        Err(last.unwrap_or(LocalError::NoEtcd))
    }

    fn spawn_all(bin: &Path, n: usize, tls: Option<TlsFiles>, timing: (u64, u64)) -> Result<Self> {
        let dir = tempfile::Builder::new()
            .prefix("leaderwatch-etcd-")
            .tempdir()
            .map_err(io("create a temp dir"))?;
        let ports = free_ports(2 * n)?;
        let members = (0..n)
            .map(|i| LocalMember {
                name: format!("m{i}"),
                scheme: if tls.is_some() { "https" } else { "http" },
                client_port: ports[2 * i],
                peer_port: ports[2 * i + 1],
                data_dir: dir.path().join(format!("m{i}.etcd")),
                log: dir.path().join(format!("m{i}.log")),
                child: None,
                frozen: false,
            })
            .collect();
        let token = format!("leaderwatch-{}", ports[0]);
        // The cluster's own health checks use the same client set-up as the prober.
        let probe = ProbeConfig {
            timeout: Duration::from_millis(800),
            tls: tls.clone().unwrap_or_default(),
            with_metrics: true,
        };
        let http_tls = http_tls(&probe, &[])
            .map_err(|e| io("HTTP client for the local cluster")(std::io::Error::other(e)))?;
        let mut c =
            LocalCluster { bin: bin.to_owned(), token, timing, tls, members, http_tls, dir };
        for i in 0..n {
            c.spawn(i)?;
        }
        Ok(c)
    }

    fn initial_cluster(&self) -> String {
        self.members
            .iter()
            .map(|m| format!("{}={}", m.name, m.peer_url()))
            .collect::<Vec<_>>()
            .join(",")
    }

    fn spawn(&mut self, i: usize) -> Result<()> {
        let initial = self.initial_cluster();
        let mut tls_args = Vec::new();
        if let Some(t) = &self.tls {
            let path = |p: &Option<PathBuf>| {
                p.as_ref().map(|p| p.display().to_string()).unwrap_or_default()
            };
            tls_args = vec![
                format!("--cert-file={}", path(&t.cert)),
                format!("--key-file={}", path(&t.key)),
                format!("--trusted-ca-file={}", path(&t.cacert)),
                "--client-cert-auth=true".to_owned(),
            ];
        }
        let m = self.members.get_mut(i).ok_or(LocalError::NoMember(i))?;
        let log = File::options()
            .create(true)
            .append(true)
            .open(&m.log)
            .map_err(io(format!("open {}", m.log.display())))?;
        let log2 = log.try_clone().map_err(io("clone log handle"))?;
        let child = Command::new(&self.bin)
            .args([
                format!("--name={}", m.name),
                format!("--data-dir={}", m.data_dir.display()),
                format!("--listen-client-urls={}", m.client_url()),
                format!("--advertise-client-urls={}", m.client_url()),
                format!("--listen-peer-urls={}", m.peer_url()),
                format!("--initial-advertise-peer-urls={}", m.peer_url()),
                format!("--initial-cluster={initial}"),
                "--initial-cluster-state=new".to_owned(),
                format!("--initial-cluster-token={}", self.token),
                format!("--heartbeat-interval={}", self.timing.0),
                format!("--election-timeout={}", self.timing.1),
                "--logger=zap".to_owned(),
            ])
            .args(&tls_args)
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log2)
            .spawn()
            .map_err(io(format!("start {}", self.bin.display())))?;
        m.child = Some(child);
        m.frozen = false;
        Ok(())
    }

    fn logs_contain(&self, needle: &str) -> bool {
        self.members
            .iter()
            .any(|m| std::fs::read_to_string(&m.log).is_ok_and(|t| t.contains(needle)))
    }

    /// The members as leaderwatch probes them: `m0=http://127.0.0.1:PORT`, ...
    pub fn members(&self) -> Vec<Member> {
        self.members
            .iter()
            .map(|m| Member { name: MemberName(m.name.clone()), url: m.client_url() })
            .collect()
    }

    pub fn len(&self) -> usize {
        self.members.len()
    }

    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// (--heartbeat-interval, --election-timeout) of every member, in ms.
    pub fn timing(&self) -> (u64, u64) {
        self.timing
    }

    /// Where the members' data dirs and logs are.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    pub fn state(&mut self, i: usize) -> Result<MemberState> {
        let m = self.members.get_mut(i).ok_or(LocalError::NoMember(i))?;
        let alive = match m.child.as_mut() {
            Some(c) => matches!(c.try_wait(), Ok(None)),
            None => false,
        };
        Ok(match (alive, m.frozen) {
            (false, _) => MemberState::Stopped,
            (true, true) => MemberState::Frozen,
            (true, false) => MemberState::Running,
        })
    }

    fn pid(&self, i: usize) -> Result<Pid> {
        let m = self.members.get(i).ok_or(LocalError::NoMember(i))?;
        let c = m.child.as_ref().ok_or(LocalError::State(i, "not running"))?;
        Ok(Pid::from_raw(c.id() as i32))
    }

    fn signal(&self, i: usize, sig: Signal) -> Result<()> {
        kill(self.pid(i)?, sig).map_err(|e| io(format!("send {sig} to member {i}"))(e.into()))
    }

    /// SIGKILL: the member dies at once, as on a node failure.
    pub async fn kill(&mut self, i: usize) -> Result<()> {
        self.signal(i, Signal::SIGCONT)?; // a frozen process must be able to die
        self.signal(i, Signal::SIGKILL)?;
        self.reap(i, Duration::from_secs(10)).await
    }

    /// SIGTERM, what the kubelet sends on eviction: etcd transfers leadership first.
    /// Escalates to SIGKILL after `grace` (the pod's terminationGracePeriodSeconds).
    pub async fn terminate(&mut self, i: usize, grace: Duration) -> Result<()> {
        self.signal(i, Signal::SIGTERM)?;
        if self.reap(i, grace).await.is_err() {
            return self.kill(i).await;
        }
        Ok(())
    }

    /// SIGSTOP: the process is frozen, its sockets stay open and silent.
    pub fn freeze(&mut self, i: usize) -> Result<()> {
        self.signal(i, Signal::SIGSTOP)?;
        if let Some(m) = self.members.get_mut(i) {
            m.frozen = true;
        }
        Ok(())
    }

    /// SIGCONT after [`LocalCluster::freeze`].
    pub fn thaw(&mut self, i: usize) -> Result<()> {
        self.signal(i, Signal::SIGCONT)?;
        if let Some(m) = self.members.get_mut(i) {
            m.frozen = false;
        }
        Ok(())
    }

    /// Starts a stopped member again on its data dir (it rejoins, it does not re-bootstrap).
    pub fn restart(&mut self, i: usize) -> Result<()> {
        if self.state(i)? != MemberState::Stopped {
            return Err(LocalError::State(i, "still running"));
        }
        self.spawn(i)
    }

    async fn reap(&mut self, i: usize, within: Duration) -> Result<()> {
        let deadline = Instant::now() + within;
        loop {
            let m = self.members.get_mut(i).ok_or(LocalError::NoMember(i))?;
            let done = match m.child.as_mut() {
                Some(c) => !matches!(c.try_wait(), Ok(None)),
                None => true,
            };
            if done {
                m.child = None;
                m.frozen = false;
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(LocalError::State(i, "still running after the signal"));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Does member `i` answer `/health` with true?
    pub async fn healthy(&self, i: usize) -> bool {
        let Some(m) = self.members.get(i) else { return false };
        matches!(self.get(&m.client_url(), "/health").await, Some((200..=299, _)))
    }

    /// `GET path` of a member with the cluster's own 800 ms bound; `None` when it failed.
    async fn get(&self, url: &str, path: &str) -> Option<(u16, Vec<u8>)> {
        let conn = Http1Conn::new(url, self.http_tls.clone()).ok()?;
        let mut body = Vec::new();
        let got = conn.get(path, 16 * 1024 * 1024, |c| body.extend_from_slice(c));
        match tokio::time::timeout(Duration::from_millis(800), got).await {
            Ok(Ok(code)) => Some((code, body)),
            _ => None,
        }
    }

    /// Waits until every running member answers `/health` true (so a leader exists).
    pub async fn wait_healthy(&mut self, timeout: Duration) -> Result<()> {
        let deadline = Instant::now() + timeout;
        loop {
            let mut all = true;
            for i in 0..self.members.len() {
                if self.state(i)? == MemberState::Running && !self.healthy(i).await {
                    all = false;
                    break;
                }
            }
            if all {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(LocalError::NotHealthy {
                    timeout,
                    logs: self.dir.path().display().to_string(),
                });
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The index of the member whose `/metrics` says `etcd_server_is_leader 1`.
    pub async fn leader(&self) -> Option<usize> {
        for (i, m) in self.members.iter().enumerate() {
            if m.frozen || m.child.is_none() {
                continue;
            }
            let Some((_, page)) = self.get(&m.client_url(), "/metrics").await else {
                continue;
            };
            if metrics::extract(&page).ok().and_then(|x| x.is_leader) == Some(true) {
                return Some(i);
            }
        }
        None
    }

    /// Waits for a leader among the running members.
    pub async fn wait_leader(&self, timeout: Duration) -> Option<usize> {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if let Some(l) = self.leader().await {
                return Some(l);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        None
    }

    fn kill_all(&mut self) {
        for m in &mut self.members {
            if let Some(mut c) = m.child.take() {
                let pid = Pid::from_raw(c.id() as i32);
                let _ = kill(pid, Signal::SIGCONT);
                let _ = c.kill();
                let _ = c.wait();
            }
        }
    }
}

impl Drop for LocalCluster {
    fn drop(&mut self) {
        self.kill_all();
    }
}

//! A running lw-lab cluster for the tests on the real control plane (tests/lab/kube.rs,
//! tests/lab/in_cluster.rs): start, dlock deployed as a user deploys it, kubectl as the admin,
//! a kubeconfig for leaderwatch's ServiceAccount, the audit log, teardown on drop.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// One cluster at a time in this test binary: its tests share one directory ([`dir`]).
/// Another binary may run its own cluster beside (make test-lab's two lanes), each in a
/// directory of its own.
pub static ONE_CLUSTER: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// A running lw-lab cluster, stopped (SIGTERM, then SIGKILL) when dropped, a panic included.
pub struct Lab {
    pub child: Child,
    pub dir: PathBuf,
    pub state: Value,
    _one: std::sync::MutexGuard<'static, ()>,
}

/// The cluster's directory: `LW_LAB_TEST_DIR`, else .tools/lab-test (make test-lab gives
/// each of its lanes its own).
pub fn dir() -> PathBuf {
    std::env::var_os("LW_LAB_TEST_DIR")
        .map_or_else(|| repo().join(".tools/lab-test"), PathBuf::from)
}

impl Lab {
    /// A cluster with dlock deployed as a user does, the ServiceAccount's kubeconfig, and a
    /// directory for the runs.
    pub fn deployed(apiserver_args: &[&str]) -> (Lab, PathBuf, tempfile::TempDir) {
        Lab::deployed_with(apiserver_args, &[])
    }

    /// `flags`: lw-lab's own, e.g. --surge-nodes (a node of the zone joins when one is
    /// cordoned) or --disk-faults (every volume on lw-slowfs).
    pub fn deployed_with(
        apiserver_args: &[&str],
        flags: &[&str],
    ) -> (Lab, PathBuf, tempfile::TempDir) {
        let lab = Lab::up_with(apiserver_args, flags);
        lab.deploy();
        let kc = lab.service_account_kubeconfig();
        (lab, kc, tempfile::tempdir().expect("tempdir"))
    }

    pub fn up_with(apiserver_args: &[&str], flags: &[&str]) -> Lab {
        Lab::up_images(apiserver_args, flags, &[])
    }

    /// `images`: lw-lab's --image REF=LAYOUT[:TAG], imported into every node besides etcd's.
    pub fn up_images(apiserver_args: &[&str], flags: &[&str], images: &[String]) -> Lab {
        // A test that panicked poisons the lock; its cluster is gone (Drop), so go on.
        let one = ONE_CLUSTER.lock().unwrap_or_else(|p| p.into_inner());
        let bin = repo().join("lab/target/debug/lw-lab");
        assert!(bin.is_file(), "{} missing: run `make kube-tools`", bin.display());
        let dir = dir();
        let child = Command::new(&bin)
            .arg("--dir")
            .arg(&dir)
            .arg("--tools")
            .arg(repo().join(".tools"))
            .args(flags)
            .args(images.iter().map(|i| format!("--image={i}")))
            .arg("up")
            .args(apiserver_args.iter().map(|a| format!("--apiserver-arg={a}")))
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start lw-lab up");
        let pid = u64::from(child.id());
        let mut lab = Lab { child, dir: dir.clone(), state: Value::Null, _one: one };
        let t = Instant::now();
        // Ready means: the ready file and a state.json of this very process (a previous
        // run's directory may still be there for a moment before lw-lab moves it aside).
        let mine = |dir: &Path| {
            dir.join("ready").is_file()
                && std::fs::read(dir.join("state.json"))
                    .ok()
                    .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
                    .is_some_and(|s| s["pid"].as_u64() == Some(pid))
        };
        while !mine(&dir) {
            if let Ok(Some(st)) = lab.child.try_wait() {
                panic!("lw-lab up exited {st} before the cluster was ready");
            }
            assert!(t.elapsed() < Duration::from_secs(180), "cluster not ready within 180 s");
            std::thread::sleep(Duration::from_millis(300));
        }
        lab.state =
            serde_json::from_slice(&std::fs::read(dir.join("state.json")).expect("state.json"))
                .expect("state json");
        lab
    }

    /// `lw-lab fault ARGS` on this cluster (its stdout); panics naming the fault if it fails.
    pub fn fault(&self, args: &[&str]) -> String {
        let o = Command::new(repo().join("lab/target/debug/lw-lab"))
            .arg("--dir")
            .arg(&self.dir)
            .arg("--tools")
            .arg(repo().join(".tools"))
            .arg("fault")
            .args(args)
            .output()
            .expect("run lw-lab fault");
        let (out, err) = (String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
        assert!(o.status.success(), "lw-lab fault {}: {out}{err}", args.join(" "));
        out.into_owned()
    }

    /// The host pid of a pod's first container (`containerd://<id>`), read by the nodes'
    /// own runc from their shared state directory.
    pub fn container_pid(&self, pod: &Value) -> i32 {
        let id = pod["status"]["containerStatuses"][0]["containerID"]
            .as_str()
            .and_then(|c| c.strip_prefix("containerd://"))
            .unwrap_or_else(|| panic!("no containerd:// container id in {pod}"))
            .to_string();
        let o = Command::new(self.state["runc"].as_str().expect("runc"))
            .arg("--root")
            .arg(self.state["runc_root"].as_str().expect("runc_root"))
            .args(["state", &id])
            .output()
            .expect("runc state");
        let v: Value = serde_json::from_slice(&o.stdout)
            .unwrap_or_else(|_| panic!("runc state {id}: {}", String::from_utf8_lossy(&o.stderr)));
        v["pid"].as_i64().expect("pid") as i32
    }

    pub fn kubectl(&self, args: &[&str]) -> (bool, String, String) {
        let o = Command::new(self.state["kubectl"].as_str().expect("kubectl"))
            .args(args)
            .env("KUBECONFIG", self.state["kubeconfig"].as_str().expect("kubeconfig"))
            .current_dir(repo())
            .output()
            .expect("run kubectl");
        (
            o.status.success(),
            String::from_utf8_lossy(&o.stdout).into_owned(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    }

    pub fn ok(&self, args: &[&str]) -> String {
        let (ok, out, err) = self.kubectl(args);
        assert!(ok, "kubectl {}: {err}", args.join(" "));
        out
    }

    pub fn json(&self, args: &[&str]) -> Value {
        serde_json::from_str(&self.ok(args)).expect("kubectl json")
    }

    /// What a user does first: namespace, apply.sh, leaderwatch's namespace and RBAC.
    pub fn deploy(&self) {
        self.ok(&["apply", "-f", "deploy/k8s/namespace.yaml"]);
        let st = Command::new(repo().join("deploy/k8s/apply.sh"))
            .env("KUBECONFIG", self.state["kubeconfig"].as_str().expect("kubeconfig"))
            .env("KUBECTL", self.state["kubectl"].as_str().expect("kubectl"))
            .current_dir(repo())
            .stdout(Stdio::null())
            .status()
            .expect("apply.sh");
        assert!(st.success(), "apply.sh: {st}");
        self.ok(&["apply", "-f", "deploy/k8s/leaderwatch/namespace.yaml"]);
        self.ok(&["apply", "-f", "deploy/k8s/leaderwatch/rbac.yaml"]);
    }

    /// A kubeconfig for the `leaderwatch` ServiceAccount (TokenRequest), never the admin's.
    pub fn service_account_kubeconfig(&self) -> PathBuf {
        let token = self.ok(&["-n", "dlock", "create", "token", "leaderwatch", "--duration=1h"]);
        let path = self.dir.join("leaderwatch.kubeconfig");
        self.kubeconfig_for(&path, &format!("    token: {}\n", token.trim()));
        path
    }

    /// Writes a kubeconfig for this cluster (its server and CA, from the admin's) whose one
    /// user is `user`: the lines of its `user:` block, indented four spaces.
    pub fn kubeconfig_for(&self, path: &Path, user: &str) {
        let admin = std::fs::read_to_string(self.state["kubeconfig"].as_str().expect("kubeconfig"))
            .expect("admin kubeconfig");
        let ca = admin
            .lines()
            .find_map(|l| l.trim().strip_prefix("certificate-authority-data: "))
            .expect("CA");
        std::fs::write(
            path,
            format!(
                "apiVersion: v1\nkind: Config\nclusters:\n- name: lab\n  cluster:\n    server: {}\n    certificate-authority-data: {ca}\nusers:\n- name: sa\n  user:\n{user}contexts:\n- name: sa\n  context:\n    cluster: lab\n    user: sa\n    namespace: dlock\ncurrent-context: sa\n",
                self.state["server"].as_str().expect("server"),
            ),
        )
        .expect("write kubeconfig");
    }

    pub fn etcdctl(&self, args: &[&str]) -> String {
        let mut a = vec!["-n", "dlock", "exec", "dlock-etcd-0", "--", "etcdctl"];
        a.extend(args);
        self.ok(&a)
    }

    /// The etcd member pods, as the API lists them.
    pub fn member_pods(&self) -> Vec<Value> {
        let pods = self.json(&[
            "-n",
            "dlock",
            "get",
            "pods",
            "-l",
            "app.kubernetes.io/name=dlock-etcd",
            "-o",
            "json",
        ]);
        pods["items"].as_array().expect("pods").clone()
    }

    /// The etcd pods' client URLs at their addresses from the API (pods without one yet are
    /// left out).
    pub fn client_urls(&self) -> Vec<String> {
        self.member_pods()
            .iter()
            .filter_map(|p| p["status"]["podIP"].as_str())
            .map(|ip| format!("http://{ip}:2379"))
            .collect()
    }

    /// [`Lab::client_urls`] as a function another thread can call (a client following the
    /// members as pods are replaced); an API error gives no addresses, never a panic.
    pub fn client_urls_fn(&self) -> impl Fn() -> Vec<String> + Send + 'static {
        let kubectl = self.state["kubectl"].as_str().expect("kubectl").to_owned();
        let kubeconfig = self.state["kubeconfig"].as_str().expect("kubeconfig").to_owned();
        move || {
            let o = Command::new(&kubectl)
                .args(["-n", "dlock", "get", "pods", "-l", "app.kubernetes.io/name=dlock-etcd"])
                .args(["-o", "jsonpath={range .items[*]}{.status.podIP}{\"\\n\"}{end}"])
                .env("KUBECONFIG", &kubeconfig)
                .output();
            o.ok()
                .filter(|o| o.status.success())
                .map(|o| {
                    String::from_utf8_lossy(&o.stdout)
                        .lines()
                        .filter(|l| !l.is_empty())
                        .map(|ip| format!("http://{ip}:2379"))
                        .collect()
                })
                .unwrap_or_default()
        }
    }

    /// Every member's status, asked at the pods' addresses rather than at the member list's
    /// DNS names: CoreDNS caches a replaced member's NXDOMAIN for up to 30 s after its pod
    /// is back (regression: the drain without a surge node failed here with "no such host"
    /// after leaderwatch had seen the list healthy).
    fn endpoint_status(&self) -> Value {
        let joined = self.client_urls().join(",");
        serde_json::from_str(&self.etcdctl(&[
            "endpoint",
            "status",
            "--endpoints",
            &joined,
            "-w",
            "json",
        ]))
        .expect("status json")
    }

    pub fn raft_term(&self) -> u64 {
        let v = self.endpoint_status();
        v.as_array()
            .expect("array")
            .iter()
            .filter_map(|e| e["Status"]["raftTerm"].as_u64())
            .max()
            .expect("a term")
    }

    /// The audit log's events for leaderwatch's ServiceAccount, and every Eviction.
    pub fn audit(&self) -> Vec<Value> {
        let text = std::fs::read_to_string(self.state["audit_log"].as_str().expect("audit_log"))
            .unwrap_or_default();
        text.lines().filter_map(|l| serde_json::from_str(l).ok()).collect()
    }

    pub fn state_now(&self) -> Value {
        serde_json::from_slice(&std::fs::read(self.dir.join("state.json")).expect("state.json"))
            .expect("state json")
    }

    pub fn apiserver_pid(&self) -> i32 {
        self.state_now()["pids"]["kube-apiserver"].as_i64().expect("kube-apiserver pid") as i32
    }

    /// Requests by leaderwatch's ServiceAccount with this verb on this resource that
    /// succeeded (audit log), by object name.
    pub fn sa_requests(&self, verb: &str, resource: &str) -> Vec<String> {
        self.audit()
            .iter()
            .filter(|e| {
                e["stage"] == "ResponseComplete"
                    && e["verb"] == verb
                    && e["objectRef"]["resource"] == resource
                    && e["user"]["username"] == "system:serviceaccount:dlock:leaderwatch"
            })
            .filter(|e| {
                e["responseStatus"]["code"].as_i64().is_some_and(|c| (200..300).contains(&c))
            })
            .map(|e| e["objectRef"]["name"].as_str().unwrap_or("").to_string())
            .collect()
    }

    pub fn zone(&self, node: &str) -> String {
        self.json(&["get", "node", node, "-o", "json"])["metadata"]["labels"]["topology.kubernetes.io/zone"].as_str().unwrap_or("").to_string()
    }

    pub fn unschedulable(&self, node: &str) -> bool {
        self.json(&["get", "node", node, "-o", "json"])["spec"]["unschedulable"]
            .as_bool()
            .unwrap_or(false)
    }

    /// The etcd leader's member name.
    pub fn leader(&self) -> String {
        let v = self.endpoint_status();
        let leader = v
            .as_array()
            .and_then(|a| a.iter().find_map(|e| e["Status"]["leader"].as_u64()))
            .expect("a leader");
        let members: Value = serde_json::from_str(&self.etcdctl(&["member", "list", "-w", "json"]))
            .expect("member json");
        members["members"]
            .as_array()
            .and_then(|a| a.iter().find(|m| m["ID"].as_u64() == Some(leader)))
            .and_then(|m| m["name"].as_str())
            .expect("the leader's name")
            .to_string()
    }

    /// Waits (at most 180 s) until dlock's PDB allows one disruption again: the pod a sitting
    /// replaced is Ready. 180 s, not 90: an Eviction cut off after the API server counted it
    /// in the PDB's `disruptedPods` but before it deleted the pod (a SIGTERM mid-request: the
    /// audit log showed it as a 504) holds the budget until the disruption controller drops
    /// the entry, 2 minutes later (regression: the SIGTERM'd drain's next step timed out).
    pub fn wait_pdb_allows_one(&self) {
        let t = Instant::now();
        while t.elapsed() < Duration::from_secs(180) {
            if self.json(&["-n", "dlock", "get", "pdb", "dlock-etcd-pdb", "-o", "json"])["status"]["disruptionsAllowed"]
                == 1
            {
                return;
            }
            std::thread::sleep(Duration::from_secs(1));
        }
        panic!("the PDB did not allow a disruption within 180 s");
    }

    /// The evictions accepted after the first `n` (a step's own, on a cluster that ran
    /// other steps before it).
    pub fn evictions_since(&self, n: usize) -> Vec<String> {
        self.accepted_evictions().split_off(n)
    }

    /// Waits (at most 180 s) until the three members are Ready and the PDB allows one
    /// disruption again: where the next step on the same cluster starts from.
    pub fn wait_settled(&self) {
        let t = Instant::now();
        loop {
            let ready = self
                .member_pods()
                .iter()
                .filter(|p| {
                    p["metadata"]["deletionTimestamp"].is_null()
                        && p["status"]["conditions"].as_array().is_some_and(|c| {
                            c.iter().any(|c| c["type"] == "Ready" && c["status"] == "True")
                        })
                })
                .count();
            let pdb = self.json(&["-n", "dlock", "get", "pdb", "dlock-etcd-pdb", "-o", "json"]);
            if ready == 3 && pdb["status"]["disruptionsAllowed"] == 1 {
                return;
            }
            assert!(
                t.elapsed() < Duration::from_secs(180),
                "not settled within 180 s: {ready}/3 Ready, PDB {}",
                pdb["status"]
            );
            std::thread::sleep(Duration::from_millis(500));
        }
    }

    pub fn accepted_evictions(&self) -> Vec<String> {
        self.audit()
            .iter()
            .filter(|e| {
                e["stage"] == "ResponseComplete"
                    && e["objectRef"]["subresource"] == "eviction"
                    && e["verb"] == "create"
                    && e["responseStatus"]["code"] == 201
            })
            .map(|e| e["objectRef"]["name"].as_str().unwrap_or("").to_string())
            .collect()
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(self.child.id() as i32),
            nix::sys::signal::Signal::SIGTERM,
        );
        let t = Instant::now();
        while t.elapsed() < Duration::from_secs(90) {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

//! Each subcommand's `--help` text after its flags: the steps it takes, examples a user
//! can paste, and its exit codes (the table in src/main.rs is the one these repeat).

pub(super) const SITTING_EXAMPLES: &str = "\
Steps:
  1. checks: the cluster's version, the namespaces dlock (the members) and leaderwatch (the
     Job), the Job's rights bound by an admin (rbac.yaml, and rbac-maintenance.yaml or
     rbac-drain.yaml when --method needs it: the sitting never changes RBAC), a
     server-side dry run of the PVC and the Job (and with --pod-monitoring the live view's
     PodMonitoring), the image reference (a tag is warned
     about: pin the digest) and its platforms, read from its registry with docker's
     credentials (the Job asks for the image's architecture: kubernetes.io/arch), the
     preflight's API checks (members, zones, PVCs, PDB);
  2. says how long it takes (--idle and --settle: 20m and 5m, a --dry-run 2m and 1m) and the
     Job's deadline, and applies the PVC and the Job in namespace leaderwatch, with --target
     --method --idle --settle --evict-timeout --recovery-timeout --environment and this
     binary's build (--expect-build: an image of another
     build refuses to run) in its arguments (the committed files are the template and are
     never edited);
  3. follows the Job: its phase, the time left, its events and log lines. A pod that
     cannot start (image pull, admission, no node) ends it with the cause and the Job
     deleted; API errors are retried for --reconnect-for, then it detaches (exit 9), as
     Ctrl-C does; the sitting goes on, and `leaderwatch sitting --attach` follows it again;
  4. when the Job ends, brings its whole run directory back through the API (a pod that
     mounts the volume read-only prints it to its log), every file checked against the
     checksums the Job wrote, into OUT-DIR/LABEL-TARGET-METHOD-UTC; a Job that wrote no run
     directory (its preflight failed, another build) says why and is deleted;
  5. renders the table of --readme from OUT-DIR/*/baseline.json (dry runs left out) and
     prints the T-056 note;
  6. deletes the Job and its pod (not with --keep) and the live view's PodMonitoring; the
     PVC stays unless --cleanup-pvc; an
     extra RBAC file is an admin's to delete (said). A failed fetch keeps everything: --fetch tries again.
OUT-DIR and --readme default to data/ and deploy/k8s/etcd/README.md of the leaderwatch
checkout it runs in or was installed from (`cargo install --path .`). --attach and --fetch
take --label, --out-dir, --readme, --ledger, --cleanup-pvc and --keep from the sitting they
find when this machine started it (remembered until its hand-off is done).

Examples:
  # GKE, first: everything but the eviction (a server-side dry run), with the digest you pushed
  leaderwatch sitting --context gke_PROJECT_europe-west1_dlock-gke --dry-run \\
    --image europe-west1-docker.pkg.dev/PROJECT/dlock/leaderwatch@sha256:DIGEST
  # the spec's sitting (a follower evicted)
  leaderwatch sitting --context gke_PROJECT_europe-west1_dlock-gke --image IMAGE@sha256:DIGEST
  # the same, shown live in Managed Prometheus while it runs (PodMonitoring leaderwatch-sitting)
  leaderwatch sitting --context gke_PROJECT_europe-west1_dlock-gke --image IMAGE@sha256:DIGEST --pod-monitoring
  # a leader eviction on GKE, then follow a sitting you detached from
  leaderwatch sitting --context gke_PROJECT_europe-west1_dlock-gke --image IMAGE --target leader
  leaderwatch sitting --context gke_PROJECT_europe-west1_dlock-gke --attach
  # the local control plane (make rehearse-kube does this with the image make image built)
  leaderwatch sitting --kubeconfig .tools/lab/kubeconfig --image IMAGE --label kube-in-cluster \\
    --environment \"local control plane (lw-lab), Kubernetes v1.35.4, etcd 3.6.14, in-cluster Job\"
Exit codes: 0 complete and fetched, 2 bad input, 3 the local run directory not writable,
5 the sitting was incomplete (fetched), 6 Kubernetes API unusable, 7 preflight failed (nothing
applied, or in the Job: deleted), 8 a step failed (named; what is on the PVC is kept; a pod that
could not start or a Job that wrote nothing: deleted), 9 detached (Ctrl-C, or the API away
longer than --reconnect-for).";

pub(super) const PREFLIGHT_EXAMPLES: &str = "\
Examples:
  leaderwatch preflight                      # kubeconfig's current context, namespace dlock
  leaderwatch preflight --context gke_proj_europe-west1_dlock-gke -o json
Exit codes: 0 all PASS, 3 stdout not writable, 6 Kubernetes API unusable (config, unreachable,
403), 7 a check failed.";

pub(super) const MEASURE_EXAMPLES: &str = "\
Examples:
  # in the cluster (the sitting Job), members reached by their DNS names
  leaderwatch measure --target follower --out /data/gke-$(date -u +%Y%m%dT%H%M%SZ)
  # everything but the eviction (server-side dry run)
  leaderwatch measure --dry-run --out /tmp/dry
  # a pod deletion instead (the spec's section 6 `kubectl delete pod`; the PDB is not asked)
  leaderwatch measure --method delete --target dlock-etcd-1 --out /data/gke-delete
  # routine maintenance: a rolling restart of the StatefulSet (kubectl rollout restart)
  leaderwatch measure --method rolling-restart --out /data/gke-rolling-restart
  # a drain of the leader's node (GKE Standard or the local cluster; Autopilot may refuse the cordon)
  leaderwatch measure --method drain --target leader --down 2m --out /data/std-drain
  # without the canary's writes to dlock's etcd (no client figures then)
  leaderwatch measure --canary off --out /data/gke-no-canary
Exit codes: 0 complete, 2 bad input, 3 output, 5 incomplete (interrupted, eviction blocked or
rollout unfinished past --evict-timeout, or no recovery), 6 Kubernetes API unusable, 7 preflight
failed (nothing evicted; also a drain of a node holding two members). A drained node is
uncordoned however the sitting ends, Ctrl-C and SIGTERM included.";

pub(super) const REHEARSE_EXAMPLES: &str = "\
Examples:
  leaderwatch rehearse                       # 3 members, 60 s idle, leader target, 30 s settle
  leaderwatch rehearse --target follower --idle 5m --settle 1m --out data/rehearsal-follower
  leaderwatch rehearse --method sigkill      # a crash of the leader: a timeout election
  leaderwatch rehearse --method sigstop --down 3s   # the leader frozen for 3 s
  leaderwatch rehearse --canary off          # counters only, no client writes and reads
  ETCD_BIN=/usr/bin/etcd leaderwatch rehearse --members 5

The etcd binary comes from --etcd-bin, ETCD_BIN, .tools/bin/etcd (make deps), or PATH.
Writes samples.csv, events.csv and baseline.json to --out (default data/rehearsal-<target>-<method>-<UTC time>).
Exit codes: 0 complete, 2 bad input, 3 output not writable, 4 no etcd / cluster did not start,
5 incomplete: interrupted, the disruption failed (e.g. a restart that cannot start), or no
recovery in time; baseline.json is still written, with \"status\": \"incomplete\".";

pub(super) const RATE_EXAMPLES: &str = "\
Quiet exposure: the at_rest and settle windows of trials, and every `sample` run in a
directory, minus the time a disruption of our own or a Kubernetes one was in progress (from
the event to the member's next back / health_true, at most 10 min). Residual elections: those
in it, by cause (unexplained, node or pod events, network between members, stress).
Reading it: docs/rate.md.

Examples:
  leaderwatch rate data/                                     # every run in data/
  leaderwatch rate data/gke-*/baseline.json /data/continuous --confidence 0.9
  leaderwatch rate data/*/ -o json
  leaderwatch rate data/*/ -o csv   # the columns of report --format csv
Exit codes: 0 written, 2 bad input (a path that is neither a sitting nor a sample directory),
3 stdout not writable.";

pub(super) const REPORT_EXAMPLES: &str = "\
Examples:
  leaderwatch report data/rehearsal-*/baseline.json --format csv > baselines.csv
  leaderwatch report data/rehearsal-leader/baseline.json
  leaderwatch report data/rehearsal-*/baseline.json --update deploy/k8s/etcd/README.md
  # the alert on leaderwatch_elections_total, from sittings measured on GKE (a Rules manifest)
  leaderwatch report --alert-rule data/gke-*/baseline.json > rules.yaml && kubectl apply -f rules.yaml
  # a plain Prometheus rule file from the local rehearsals, to try it out with promtool
  leaderwatch report --alert-rule --allow-local --format prometheus data/rehearsal-*/baseline.json > rules.yml
Exit codes: 0 written, 2 bad input (a file that is not a baseline; --alert-rule without a
Kubernetes baseline and without --allow-local), 3 stdout (or the --update README) not writable.";

pub(super) const SAMPLE_EXAMPLES: &str = "\
Examples:
  # three local members, 20 minutes, 1 s interval
  leaderwatch sample --endpoint m0=http://127.0.0.1:2379 --endpoint m1=http://127.0.0.1:22379 \\
      --endpoint m2=http://127.0.0.1:32379 --duration 20m --out data/local-at-rest

  # the same, with a client's writes and reads every second (canary.csv)
  leaderwatch sample --endpoint m0=http://127.0.0.1:2379 --endpoint m1=http://127.0.0.1:22379 \\
      --endpoint m2=http://127.0.0.1:32379 --canary --out data/local-canary

  # the continuous sampler as in the cluster: daily files (30 closed days kept) and its own
  # /metrics for Prometheus on port 9464
  leaderwatch sample --endpoint m0=http://127.0.0.1:2379 --endpoint m1=http://127.0.0.1:22379 \\
      --endpoint m2=http://127.0.0.1:32379 --retain 30d --metrics-addr 0.0.0.0:9464 --out /data/continuous

  # a sitting's fast phase: Status every 100 ms, /health when its last answer may no longer
  # hold, /metrics only from a member whose Status changed
  leaderwatch sample --endpoint m0=http://127.0.0.1:2379 --endpoint m1=http://127.0.0.1:22379 \\
      --endpoint m2=http://127.0.0.1:32379 --interval 100ms --metrics-interval on-change --out data/fast

  # the dlock members through three port-forwards (run each in its own terminal)
  kubectl -n dlock port-forward pod/dlock-etcd-0 23790:2379
  kubectl -n dlock port-forward pod/dlock-etcd-1 23791:2379
  kubectl -n dlock port-forward pod/dlock-etcd-2 23792:2379
  leaderwatch sample --endpoint dlock-etcd-0=http://127.0.0.1:23790 \\
      --endpoint dlock-etcd-1=http://127.0.0.1:23791 --endpoint dlock-etcd-2=http://127.0.0.1:23792 \\
      --out data/gke-sample-$(date -u +%Y%m%dT%H%M%SZ)

Ctrl-C or SIGTERM ends the run and writes summary.json. Re-running with the same --out
appends (new run_id) after repairing a line torn by a crash.";

pub(super) const RECOUNT_EXAMPLES: &str = "\
Recounted from samples.csv (the Status answers) and events.csv: each election's old and new
leader, its time without a leader and its cause. Kept as recorded: the instants, the
canaries' figures and the health figures (samples.csv keeps too little of /metrics). Each
changed figure is one line: FILE: terms A -> B: FIELD RECORDED -> RECOUNTED. Exit 0 when
every run was read (changed or not), 2 when one could not be.

Examples:
  leaderwatch recount data/fault-node-20261207T001728Z/node-loss-toleration
  leaderwatch recount data/ data/fault-node-20261207T001728Z --write
";

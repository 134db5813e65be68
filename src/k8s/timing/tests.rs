use super::*;
use k8s_openapi::api::core::v1::EnvVar;

const AT: &str = "StatefulSet dlock/dlock-etcd container etcd";

fn sts_with(containers: Vec<Container>) -> StatefulSet {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": "dlock-etcd", "namespace": "dlock"},
        "spec": {"selector": {}, "serviceName": "x", "template": {"spec": {"containers": containers}}},
    }))
    .expect("statefulset json")
}

fn etcd(command: &[&str], args: &[&str], env: &[(&str, &str)]) -> Container {
    let strings = |v: &[&str]| (!v.is_empty()).then(|| v.iter().map(|s| s.to_string()).collect());
    Container {
        name: "etcd".into(),
        image: Some("gcr.io/etcd-development/etcd:v3.6.14".into()),
        command: strings(command),
        args: strings(args),
        env: (!env.is_empty()).then(|| {
            env.iter()
                .map(|(n, v)| EnvVar {
                    name: n.to_string(),
                    value: Some(v.to_string()),
                    value_from: None,
                })
                .collect()
        }),
        ..Container::default()
    }
}

fn timing(c: Container) -> Result<ElectionTiming, String> {
    from_statefulset(&sts_with(vec![c]), None)
}

fn ok(h: u64, e: u64, source: &str) -> Result<ElectionTiming, String> {
    Ok(ElectionTiming { heartbeat_ms: h, election_ms: e, source: source.into() })
}

#[test]
fn flag_equals_value_in_args() {
    let c = etcd(
        &["/usr/local/bin/etcd"],
        &["--heartbeat-interval=250", "--election-timeout=2500"],
        &[],
    );
    assert_eq!(timing(c), ok(250, 2500, &format!("{AT} args")));
}

#[test]
fn flag_space_value_in_command_and_the_last_occurrence_wins() {
    let c = etcd(
        &[
            "etcd",
            "--heartbeat-interval",
            "50",
            "-election-timeout",
            "500",
            "--heartbeat-interval",
            "60",
        ],
        &[],
        &[],
    );
    assert_eq!(timing(c), ok(60, 500, &format!("{AT} command")));
}

#[test]
fn env_literal() {
    let c =
        etcd(&[], &[], &[("ETCD_HEARTBEAT_INTERVAL", "200"), ("ETCD_ELECTION_TIMEOUT", "2000")]);
    let t = timing(c).expect("timing");
    assert_eq!((t.heartbeat_ms, t.election_ms), (200, 2000));
    assert_eq!(
        t.source,
        format!(
            "heartbeat: {AT} env ETCD_HEARTBEAT_INTERVAL; election: {AT} env ETCD_ELECTION_TIMEOUT"
        )
    );
}

#[test]
fn a_flag_wins_over_its_env_var() {
    let c = etcd(&["etcd"], &["--heartbeat-interval=300"], &[("ETCD_HEARTBEAT_INTERVAL", "999")]);
    assert_eq!(timing(c).map(|t| t.heartbeat_ms), Ok(300));
}

#[test]
fn var_references_are_expanded_like_the_kubelet() {
    let c = etcd(
        &["etcd"],
        &["--heartbeat-interval=$(HB)", "--election-timeout=$(EL)"],
        &[("HB", "150"), ("BASE", "15"), ("EL", "$(BASE)00")],
    );
    let t = timing(c).expect("timing");
    assert_eq!((t.heartbeat_ms, t.election_ms), (150, 1500));
    assert_eq!(
        t.source,
        format!("heartbeat: {AT} args via env HB; election: {AT} args via env EL")
    );
    // `$$(HB)` is the escape for a literal `$(HB)`, which etcd cannot parse.
    let c = etcd(&["etcd"], &["--heartbeat-interval=$$(HB)"], &[("HB", "150")]);
    assert_eq!(
        timing(c),
        Err(format!(
            "{AT}: --heartbeat-interval \"$(HB)\" (args) is not a whole number of milliseconds"
        ))
    );
}

#[test]
fn a_reference_to_a_value_from_is_not_readable() {
    let mut c = etcd(&["etcd"], &["--election-timeout=$(EL)"], &[]);
    c.env = Some(vec![serde_json::from_value(serde_json::json!({"name": "EL", "valueFrom": {"configMapKeyRef": {"name": "t", "key": "el"}}})).expect("env")]);
    let err = timing(c.clone()).expect_err("valueFrom");
    assert!(
        err.contains("--election-timeout \"$(EL)\"")
            && err.contains("valueFrom")
            && err.contains("configMapKeyRef"),
        "{err}"
    );
    // The same as the env var etcd reads.
    c.args = None;
    c.env = Some(vec![serde_json::from_value(serde_json::json!({"name": "ETCD_ELECTION_TIMEOUT", "valueFrom": {"secretKeyRef": {"name": "t", "key": "el"}}})).expect("env")]);
    let err = timing(c).expect_err("valueFrom");
    assert!(
        err.contains("--election-timeout")
            && err.contains("valueFrom")
            && err.contains("not readable"),
        "{err}"
    );
}

#[test]
fn env_from_may_hide_the_env_var_so_no_default_is_claimed() {
    let mut c = etcd(&["etcd"], &["--heartbeat-interval=100"], &[]);
    c.env_from = Some(vec![
        serde_json::from_value(serde_json::json!({"configMapRef": {"name": "etcd-env"}}))
            .expect("envFrom"),
    ]);
    let err = timing(c).expect_err("envFrom");
    assert!(err.contains("--election-timeout") && err.contains("etcd-env"), "{err}");
}

#[test]
fn defaults_when_nothing_sets_them() {
    assert_eq!(timing(etcd(&["etcd"], &["--name=x"], &[])), ok(100, 1000, "etcd default"));
    assert_eq!(timing(etcd(&[], &[], &[])), ok(100, 1000, "etcd default"));
}

#[test]
fn mixed_sources_name_both() {
    let c = etcd(&["etcd"], &["--heartbeat-interval=100"], &[]);
    assert_eq!(timing(c), ok(100, 1000, &format!("heartbeat: {AT} args; election: etcd default")));
    let c = etcd(&["etcd"], &["--election-timeout=1200"], &[("ETCD_HEARTBEAT_INTERVAL", "120")]);
    assert_eq!(
        timing(c),
        ok(120, 1200, &format!("heartbeat: {AT} env ETCD_HEARTBEAT_INTERVAL; election: {AT} args"))
    );
}

#[test]
fn a_bad_number_names_the_flag_and_the_value() {
    let c = etcd(&["etcd"], &["--heartbeat-interval=100ms"], &[]);
    assert_eq!(
        timing(c),
        Err(format!(
            "{AT}: --heartbeat-interval \"100ms\" (args) is not a whole number of milliseconds"
        ))
    );
    let c = etcd(&["etcd"], &[], &[("ETCD_ELECTION_TIMEOUT", "1s")]);
    assert_eq!(
        timing(c),
        Err(format!(
            "{AT}: --election-timeout \"1s\" (env ETCD_ELECTION_TIMEOUT) is not a whole number of milliseconds"
        ))
    );
    let c = etcd(&["etcd", "--election-timeout"], &[], &[]);
    assert!(timing(c).is_err_and(|e| e.contains("no value")));
}

#[test]
fn a_shell_script_is_read_word_by_word() {
    let script = "exec etcd --name=${POD_NAME} \\\n  --heartbeat-interval \"$HB\" --election-timeout=${EL}; echo done";
    let c = etcd(&["/bin/sh", "-ec"], &[script], &[("HB", "110"), ("EL", "1100")]);
    let t = timing(c).expect("timing");
    assert_eq!((t.heartbeat_ms, t.election_ms), (110, 1100));
    assert_eq!(
        t.source,
        format!(
            "heartbeat: {AT} args (shell script) via env HB; election: {AT} args (shell script) via env EL"
        )
    );
    // A variable the script itself sets cannot be read from the spec.
    let c = etcd(&["sh", "-c", "T=100; etcd --heartbeat-interval=$T"], &[], &[]);
    assert!(timing(c).is_err_and(|e| e.contains("$T") && e.contains("--heartbeat-interval")));
}

#[test]
fn a_config_file_is_refused_not_defaulted() {
    let c = etcd(&["etcd"], &["--config-file=/etc/etcd/etcd.yaml"], &[]);
    assert!(timing(c).is_err_and(|e| e.contains("/etc/etcd/etcd.yaml")));
}

#[test]
fn the_etcd_container_is_found_among_sidecars() {
    let side = |name: &str, image: &str, args: &[&str]| Container {
        name: name.into(),
        image: Some(image.into()),
        args: Some(args.iter().map(|s| s.to_string()).collect()),
        ..Container::default()
    };
    let main =
        etcd(&["/usr/local/bin/etcd"], &["--heartbeat-interval=70", "--election-timeout=700"], &[]);
    let sts = sts_with(vec![
        side(
            "backup",
            "example/backup:1",
            &["--endpoints=http://etcd:2379", "--heartbeat-interval=1"],
        ),
        main.clone(),
    ]);
    assert_eq!(
        from_statefulset(&sts, None).map(|t| t.heartbeat_ms),
        Ok(70),
        "the container that runs etcd"
    );
    assert_eq!(from_statefulset(&sts, Some("backup")).map(|t| t.heartbeat_ms), Ok(1), "by name");
    assert!(
        from_statefulset(&sts, Some("nope"))
            .is_err_and(|e| e.contains("nope") && e.contains("backup, etcd"))
    );
    let by_image = sts_with(vec![
        side("a", "busybox", &[]),
        side("b", "quay.io/coreos/etcd:v3.5.0", &["--election-timeout=900"]),
    ]);
    assert_eq!(
        from_statefulset(&by_image, None).map(|t| t.election_ms),
        Ok(900),
        "the container whose image is etcd"
    );
}

#[test]
fn the_owner_is_one_statefulset_or_a_clear_error() {
    let kube = KubeOptions {
        kubeconfig: None,
        context: None,
        namespace: "dlock".into(),
        selector: "app=etcd".into(),
        request_timeout: std::time::Duration::from_secs(1),
    };
    let pod = |name: &str, owner: Option<(&str, &str)>| -> Pod {
        let refs: Vec<_> = owner.iter().map(|(kind, n)| serde_json::json!({"apiVersion": "apps/v1", "kind": kind, "name": n, "uid": "u", "controller": true})).collect();
        serde_json::from_value(
            serde_json::json!({"metadata": {"name": name, "ownerReferences": refs}}),
        )
        .expect("pod json")
    };
    let sts = |n| Some(("StatefulSet", n));
    assert_eq!(
        owning_statefulset(&[pod("a-0", sts("a")), pod("a-1", sts("a"))], &kube),
        Ok("a".into())
    );
    assert_eq!(
        owning_statefulset(&[], &kube),
        Err("no pod matches app=etcd in namespace dlock".into())
    );
    let two = owning_statefulset(&[pod("a-0", sts("a")), pod("b-0", sts("b"))], &kube)
        .expect_err("two owners");
    assert!(two.contains("2 StatefulSets: a (a-0), b (b-0)"), "{two}");
    let rs = owning_statefulset(
        &[pod("a-0", sts("a")), pod("x", Some(("ReplicaSet", "x"))), pod("y", None)],
        &kube,
    )
    .expect_err("orphans");
    assert!(rs.contains("pods x, y are not controlled by a StatefulSet"), "{rs}");
}

/// The repository's own etcd StatefulSet, as `kubectl apply` sends it.
fn manifest() -> StatefulSet {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/k8s/etcd/statefulset.yaml");
    let text = std::fs::read_to_string(path).expect("read deploy/k8s/etcd/statefulset.yaml");
    serde_yaml_ng::from_str(&text).expect("statefulset.yaml is a StatefulSet")
}

#[test]
fn the_real_manifest_sets_both_in_args() {
    assert_eq!(
        from_statefulset(&manifest(), None),
        ok(100, 1000, "StatefulSet dlock/dlock-etcd container etcd args")
    );
    assert_eq!(
        from_statefulset(&manifest(), Some("etcd")),
        ok(100, 1000, "StatefulSet dlock/dlock-etcd container etcd args")
    );
}

#[test]
fn the_real_manifest_is_read_not_defaulted() {
    // Its values equal etcd's defaults: prove the reading by changing the args.
    let mut sts = manifest();
    let c = sts
        .spec
        .as_mut()
        .and_then(|s| s.template.spec.as_mut())
        .map(|p| &mut p.containers[0])
        .expect("container");
    for a in c.args.iter_mut().flatten() {
        *a = a
            .replace("--heartbeat-interval=100", "--heartbeat-interval=123")
            .replace("--election-timeout=1000", "--election-timeout=1234");
    }
    assert_eq!(
        from_statefulset(&sts, None),
        ok(123, 1234, "StatefulSet dlock/dlock-etcd container etcd args")
    );
}

use super::*;

/// A pod as the API server returns it, from JSON (the shape a kubelet reports).
fn pod(status: serde_json::Value) -> Pod {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": "leaderwatch-measure-x"},
        "status": status
    }))
    .expect("pod")
}

fn waiting(reason: &str, message: &str) -> Pod {
    pod(serde_json::json!({
        "phase": "Pending",
        "containerStatuses": [{
            "name": "leaderwatch", "image": "i", "imageID": "", "ready": false,
            "restartCount": 0,
            "state": {"waiting": {"reason": reason, "message": message}}
        }]
    }))
}

fn unschedulable() -> Pod {
    pod(serde_json::json!({
        "phase": "Pending",
        "conditions": [{
            "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
            "message": "0/3 nodes are available: 3 Insufficient cpu."
        }]
    }))
}

fn ev(reason: &str, message: &str) -> Seen {
    Seen { reason: reason.into(), message: message.into() }
}

#[test]
fn a_pull_that_fails_a_bad_name_and_a_config_error_are_the_pods_trouble() {
    let t = trouble(Some(&waiting("ErrImagePull", "not found")), &[], &[]).expect("trouble");
    assert_eq!(t.kind, TroubleKind::Pull);
    assert_eq!(t.cause, "ErrImagePull: not found");
    let t = trouble(Some(&waiting("ImagePullBackOff", "Back-off")), &[], &[]).expect("trouble");
    assert_eq!(t.kind, TroubleKind::Pull);
    let t = trouble(Some(&waiting("InvalidImageName", "bad")), &[], &[]).expect("trouble");
    assert_eq!((t.kind, t.kind.grace()), (TroubleKind::BadImage, Duration::ZERO));
    let t = trouble(Some(&waiting("CreateContainerConfigError", "x")), &[], &[]).expect("t");
    assert_eq!(t.kind, TroubleKind::Create);
    // Starting up is no trouble.
    assert_eq!(trouble(Some(&waiting("ContainerCreating", "")), &[], &[]), None);
    assert_eq!(trouble(Some(&pod(serde_json::json!({"phase": "Running"}))), &[], &[]), None);
}

#[test]
fn no_pod_and_a_failed_create_is_a_refusal_with_the_admissions_words() {
    let refused = [ev("SuccessfulCreate", "x"), ev("FailedCreate", "admission webhook denied: no")];
    let t = trouble(None, &[], &refused).expect("trouble");
    assert_eq!(t.kind, TroubleKind::Refused);
    assert!(t.cause.contains("admission webhook denied: no"), "{}", t.cause);
    assert_eq!(trouble(None, &[], &[ev("SuccessfulCreate", "x")]), None);
}

#[test]
fn unschedulable_waits_longer_while_a_node_is_being_added() {
    let p = unschedulable();
    let t = trouble(Some(&p), &[], &[]).expect("trouble");
    assert_eq!(t.kind, TroubleKind::Unschedulable);
    assert!(t.cause.contains("Insufficient cpu"), "{}", t.cause);
    let up = [ev("TriggeredScaleUp", "pod triggered scale-up")];
    assert_eq!(trouble(Some(&p), &up, &[]).expect("t").kind, TroubleKind::ScalingUp);
    let no = [ev("TriggeredScaleUp", "a"), ev("NotTriggerScaleUp", "no node group fits")];
    assert_eq!(trouble(Some(&p), &no, &[]).expect("t").kind, TroubleKind::Unschedulable);
    assert!(TroubleKind::ScalingUp.grace() > TroubleKind::Unschedulable.grace());
}

#[test]
fn trouble_ends_the_follow_only_once_it_has_lasted_its_grace() {
    let t0 = Instant::now();
    let pull = Trouble { kind: TroubleKind::Pull, cause: "ErrImagePull: x".into() };
    let mut w = Watch::default();
    assert_eq!(w.observe(Some(&pull), t0), None);
    assert_eq!(w.observe(Some(&pull), t0 + Duration::from_secs(29)), None);
    assert_eq!(w.observe(Some(&pull), t0 + Duration::from_secs(30)), Some(pull.clone()));
    // A pull retried shows no trouble for a while: the first sighting still counts.
    let s = Duration::from_secs;
    let mut w = Watch::default();
    assert_eq!(w.observe(Some(&pull), t0), None);
    assert_eq!(w.observe(None, t0 + s(10)), None);
    assert_eq!(w.observe(Some(&pull), t0 + s(31)), Some(pull.clone()));
    // Gone for CLEARED: the clock starts again.
    let mut w = Watch::default();
    assert_eq!(w.observe(Some(&pull), t0), None);
    assert_eq!(w.observe(None, t0 + CLEARED), None);
    assert_eq!(w.observe(Some(&pull), t0 + CLEARED + s(1)), None);
    assert_eq!(w.observe(Some(&pull), t0 + CLEARED + s(31)), Some(pull.clone()));
    // Another kind starts its own clock.
    let mut w = Watch::default();
    let refused = Trouble { kind: TroubleKind::Refused, cause: "FailedCreate".into() };
    assert_eq!(w.observe(Some(&pull), t0), None);
    assert_eq!(w.observe(Some(&refused), t0 + s(29)), None);
    assert_eq!(w.observe(Some(&refused), t0 + s(59)), Some(refused));
    let bad = Trouble { kind: TroubleKind::BadImage, cause: "InvalidImageName".into() };
    assert_eq!(Watch::default().observe(Some(&bad), t0), Some(bad));
}

#[test]
fn a_failing_api_is_retried_with_a_doubling_wait_until_the_outage_is_too_long() {
    let t0 = Instant::now();
    let mut r = Reconnect::new(Duration::from_secs(120));
    let s = Duration::from_secs;
    assert_eq!(r.failed(t0), Retry::After { wait: s(1), first: true, down_for: s(0) });
    assert_eq!(r.failed(t0 + s(1)), Retry::After { wait: s(2), first: false, down_for: s(1) });
    assert_eq!(r.failed(t0 + s(3)), Retry::After { wait: s(4), first: false, down_for: s(3) });
    for i in 0..3 {
        r.failed(t0 + s(10 + i));
    }
    assert_eq!(r.failed(t0 + s(20)), Retry::After { wait: s(30), first: false, down_for: s(20) });
    assert_eq!(r.failed(t0 + s(120)), Retry::GiveUp { down_for: s(120) });
    // An answer ends the outage: the next failure starts a new one.
    assert_eq!(r.answered(t0 + s(121)), Some(s(121)));
    assert_eq!(r.answered(t0 + s(122)), None);
    assert_eq!(r.failed(t0 + s(130)), Retry::After { wait: s(1), first: true, down_for: s(0) });
}

fn scheduled_creating() -> Pod {
    pod(serde_json::json!({
        "phase": "Pending",
        "conditions": [{"type": "PodScheduled", "status": "True"}],
        "containerStatuses": [{
            "name": "leaderwatch", "image": "i", "imageID": "", "ready": false,
            "restartCount": 0,
            "state": {"waiting": {"reason": "ContainerCreating"}}
        }]
    }))
}

/// Regression (issue 61): a volume that could not attach or mount waited out the Job's
/// 70-minute deadline as "ContainerCreating".
#[test]
fn a_volume_that_cannot_attach_or_mount_is_trouble_with_the_events_words() {
    let p = scheduled_creating();
    for (reason, message) in [
        (
            "FailedAttachVolume",
            "Multi-Attach error for volume \"pvc-1\" Volume is already exclusively attached to one node",
        ),
        ("FailedAttachVolume", "AttachVolume.Attach failed for volume \"pvc-1\": rpc error"),
        ("FailedMount", "MountVolume.MountDevice failed for volume \"pvc-1\": timed out"),
    ] {
        let t = trouble(Some(&p), &[ev("Scheduled", "x"), ev(reason, message)], &[]).expect("t");
        assert_eq!(t.kind, TroubleKind::Volume);
        assert!(t.cause.starts_with(reason) && t.cause.contains(message), "{}", t.cause);
        assert!(t.kind.grace() <= Duration::from_secs(60), "ends within a minute");
    }
    // Attached after a failure: waiting on the container is no trouble.
    let healed = [ev("FailedAttachVolume", "x"), ev("SuccessfulAttachVolume", "ok")];
    assert_eq!(trouble(Some(&p), &healed, &[]), None);
    // Running since: an old event says nothing.
    let running = pod(serde_json::json!({
        "phase": "Running",
        "containerStatuses": [{
            "name": "leaderwatch", "image": "i", "imageID": "", "ready": true,
            "restartCount": 0, "state": {"running": {}}
        }]
    }));
    assert_eq!(trouble(Some(&running), &[ev("FailedMount", "x")], &[]), None);
}

/// Regression (issue 61): a scale-up that failed after it was triggered waited 10 minutes
/// as "scaling up".
#[test]
fn a_failed_scale_up_is_unschedulable_with_the_autoscalers_words() {
    let p = unschedulable();
    let coming = [ev("TriggeredScaleUp", "pod triggered scale-up")];
    assert_eq!(trouble(Some(&p), &coming, &[]).map(|t| t.kind), Some(TroubleKind::ScalingUp));
    for reason in ["FailedScaleUp", "NotTriggerScaleUp"] {
        let failed = [coming[0].clone(), ev(reason, "max node group size reached")];
        let t = trouble(Some(&p), &failed, &[]).expect("trouble");
        assert_eq!(t.kind, TroubleKind::Unschedulable, "{reason}");
        assert!(t.cause.contains(reason) && t.cause.contains("max node group size"), "{}", t.cause);
    }
}

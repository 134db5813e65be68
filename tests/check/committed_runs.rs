//! Regression (a newcomer's `make rehearse` then `make test` in one clone failed): the
//! rehearsal wrote data/rehearsal-leader-sigterm-<now>/, and the tests that mean "the
//! committed runs" picked runs by name prefix, so they counted it. They now read exactly
//! what git tracks under data/.

use std::path::PathBuf;

use crate::support::{self, repo};

/// A copy of a committed rehearsal under a newer name in the real data/, as `make rehearse`
/// leaves one; removed when dropped (a panic included).
struct Planted(PathBuf);

impl Drop for Planted {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn a_run_recorded_into_data_before_the_tests_changes_no_test_input() {
    let before = support::committed_runs();
    let source = support::committed_runs_named("rehearsal-leader-sigterm-2");
    assert_eq!(source.len(), 1, "{source:?}");
    let planted =
        Planted(repo("data/rehearsal-leader-sigterm-29991231T235959Z-planted-by-committed-runs"));
    std::fs::create_dir_all(&planted.0).expect("mkdir");
    for e in std::fs::read_dir(&source[0]).expect("run dir") {
        let p = e.expect("entry").path();
        std::fs::copy(&p, planted.0.join(p.file_name().expect("name"))).expect("copy");
    }
    assert!(planted.0.join("baseline.json").is_file(), "a whole run, as rehearse writes one");

    // What every reader of "the committed runs" goes through: the plant is in none of it.
    assert_eq!(support::committed_runs(), before);
    assert_eq!(support::committed_runs_named("rehearsal-leader-sigterm-2"), source);
    assert!(!support::committed_baselines().contains(&planted.0.join("baseline.json")));
    let copy = support::committed_data_dir();
    let copied = std::fs::read_dir(copy.path().join("data")).expect("copy").count();
    assert_eq!(copied, before.len(), "the copy for `rate data/` holds the committed runs only");
}

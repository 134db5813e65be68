use super::health::{bytes, cell};
use super::*;

#[test]
fn splice_replaces_only_between_markers_and_is_idempotent() {
    let doc = format!("# T\nbefore\n{BEGIN}\nold\n{END}\nafter\n");
    let once = splice(&doc, "| new |").expect("markers");
    assert_eq!(once, format!("# T\nbefore\n{BEGIN}\n| new |\n{END}\nafter\n"));
    assert_eq!(splice(&once, "| new |").expect("markers"), once);
    assert!(splice("no markers", "x").is_err());
}

#[test]
fn relative_links_walk_up_from_the_readme() {
    let p = relative(Path::new("/r/data/x/baseline.json"), Path::new("/r/deploy/k8s/etcd"));
    assert_eq!(p, PathBuf::from("../../../data/x/baseline.json"));
}

#[test]
fn compare_numbers_keep_small_latencies() {
    assert_eq!(sig(0.00199, false), "0.00199");
    assert_eq!(sig(0.203776, false), "0.204");
    assert_eq!(sig(60.000365, false), "60.000");
    assert_eq!(sig(-1.0, true), "-1");
    assert_eq!(sig(-0.000365, true), "-0.000365");
}

#[test]
fn health_cells_mark_flags_and_never_print_unknown_as_zero() {
    assert_eq!(ms(0.012), "12.0 ms");
    assert_eq!(ms(0.00125), "1.25 ms");
    assert_eq!(ms(0.203776), "204 ms");
    assert_eq!(bytes(20480.0), "20 KiB");
    assert_eq!(bytes(2147483648.0), "2 GiB");
    assert_eq!(cell(None), "—");
}

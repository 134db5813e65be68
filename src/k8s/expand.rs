//! The kubelet's `$(VAR)` expansion of a container's command, args and env values, the one
//! implementation: [`crate::k8s::timing`] reads the election timing through it, and the
//! manifest tests (tests/check/manifests.rs) check the committed StatefulSet with it.
//!
//! The kubelet's rules (k8s.io/kubernetes third_party/forked/golang/expansion): `$(NAME)` is
//! NAME's value; a NAME it does not know stays as written, `$(NAME)`; `$$` is a literal `$`
//! (so `$$(NAME)` is the text `$(NAME)`); any other `$`, and a `$(` never closed, stay as
//! written. Pure: the caller says what each name means.

use std::convert::Infallible;

/// Expands `s` with `lookup`: `Ok(Some(value))` replaces `$(NAME)`, `Ok(None)` leaves it as
/// written (undefined), `Err` ends the expansion (a name whose value cannot be known).
/// Returns the text and the names replaced, in order.
pub fn expand<E>(
    s: &str,
    mut lookup: impl FnMut(&str) -> Result<Option<String>, E>,
) -> Result<(String, Vec<String>), E> {
    let (mut out, mut via) = (String::new(), Vec::new());
    let mut rest = s;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        if let Some(r) = after.strip_prefix('$') {
            out.push('$');
            rest = r;
        } else if let Some((name, r)) = after.strip_prefix('(').and_then(|r| r.split_once(')')) {
            match lookup(name)? {
                Some(v) => {
                    out.push_str(&v);
                    via.push(name.to_owned());
                }
                None => out.push_str(&format!("$({name})")),
            }
            rest = r;
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    Ok((out, via))
}

/// [`expand`] with a lookup that always knows: `vars(NAME)` is NAME's value or undefined.
pub fn expand_with(s: &str, mut vars: impl FnMut(&str) -> Option<String>) -> String {
    let Ok((text, _)) = expand(s, |n| Ok::<_, Infallible>(vars(n)));
    text
}

/// The names `s` refers to as `$(NAME)`, in order: what the kubelet looks up (an escaped
/// `$$(NAME)` is not one).
pub fn references(s: &str) -> Vec<String> {
    let mut names = Vec::new();
    expand_with(s, |n| {
        names.push(n.to_owned());
        None
    });
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(n: &str) -> Option<String> {
        (n == "POD_NAME").then(|| "dlock-etcd-0".to_owned())
    }

    #[test]
    fn a_defined_name_is_replaced_everywhere_it_appears() {
        assert_eq!(expand_with("--name=$(POD_NAME)", pod), "--name=dlock-etcd-0");
        assert_eq!(
            expand_with("http://$(POD_NAME).x:2380,$(POD_NAME)", pod),
            "http://dlock-etcd-0.x:2380,dlock-etcd-0"
        );
        assert_eq!(expand_with("€$(POD_NAME)€", pod), "€dlock-etcd-0€");
    }

    #[test]
    fn an_undefined_name_stays_as_written() {
        assert_eq!(expand_with("$(UNDEFINED)", pod), "$(UNDEFINED)");
        assert_eq!(expand_with("$()", pod), "$()");
    }

    #[test]
    fn a_double_dollar_is_one_dollar_and_escapes_a_reference() {
        assert_eq!(expand_with("$$(POD_NAME)", pod), "$(POD_NAME)");
        assert_eq!(expand_with("a$$b", pod), "a$b");
        assert_eq!(expand_with("$$$(POD_NAME)", pod), "$dlock-etcd-0");
    }

    #[test]
    fn a_lone_dollar_and_an_unclosed_reference_stay_as_written() {
        assert_eq!(expand_with("a$b $(", pod), "a$b $(");
        assert_eq!(expand_with("$(POD_NAME", pod), "$(POD_NAME");
        assert_eq!(expand_with("cost: 5$", pod), "cost: 5$");
    }

    #[test]
    fn a_value_is_not_expanded_again() {
        let v = |n: &str| (n == "A").then(|| "$(B)".to_owned());
        assert_eq!(expand_with("$(A)", v), "$(B)");
    }

    #[test]
    fn the_names_replaced_are_returned_and_a_lookup_error_ends_it() {
        let r = expand("$(A)-$(B)-$(C)", |n| match n {
            "A" => Ok(Some("1".to_owned())),
            "B" => Ok(None),
            _ => Err(format!("{n}: unreadable")),
        });
        assert_eq!(r, Err("C: unreadable".to_owned()));
        let r = expand("$(A)-$(B)", |n| Ok::<_, String>((n == "A").then(|| "1".to_owned())));
        assert_eq!(r, Ok(("1-$(B)".to_owned(), vec!["A".to_owned()])));
    }

    #[test]
    fn references_are_the_names_looked_up_escapes_excepted() {
        assert_eq!(references("--x=$(A),$$(B),$(C"), vec!["A".to_owned()]);
        assert_eq!(references("$(A)$(A)"), vec!["A".to_owned(), "A".to_owned()]);
    }
}

//! Edits a JSON document in place: one value, found by its path, replaced, every other
//! byte kept. `recount --write` changes a few figures of a recorded baseline.json or
//! summary.json; reading the whole file into its type and writing it back would also
//! rewrite every float the parser reads to the nearest double but one (serde_json's fast
//! parser), changing figures nobody recounted.

use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;

/// One step of a path: an object's key or an array's index.
#[derive(Debug, Clone, PartialEq)]
pub enum Step<'p> {
    Key(&'p str),
    Index(usize),
}

/// An object's entries in file order, each value as its text.
struct Entries<'a>(Vec<(String, &'a RawValue)>);

impl<'de: 'a, 'a> Deserialize<'de> for Entries<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = Entries<'a>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<M: MapAccess<'de>>(self, mut m: M) -> Result<Entries<'a>, M::Error> {
                let mut out = Vec::new();
                while let Some((k, v)) = m.next_entry::<String, &'de RawValue>()? {
                    out.push((k, v));
                }
                Ok(Entries(out))
            }
        }
        d.deserialize_map(V(std::marker::PhantomData))
    }
}

/// `text` with the value at `path` replaced by `new`, written as serde_json's pretty
/// printer writes it (two spaces a level, a struct's fields in their order) at that depth;
/// every other byte as it was.
pub fn replace<T: serde::Serialize>(text: &str, path: &[Step], new: &T) -> Result<String, String> {
    let mut at: &RawValue = serde_json::from_str(text).map_err(|e| e.to_string())?;
    for step in path {
        at = match step {
            Step::Key(k) => {
                let Entries(entries) = serde_json::from_str(at.get()).map_err(|e| e.to_string())?;
                entries.into_iter().find(|(name, _)| name == k).map(|(_, v)| v)
            }
            Step::Index(i) => {
                let items: Vec<&RawValue> =
                    serde_json::from_str(at.get()).map_err(|e| e.to_string())?;
                items.get(*i).copied()
            }
        }
        .ok_or_else(|| format!("no {step:?} on the path {path:?}"))?;
    }
    let start = at.get().as_ptr() as usize - text.as_ptr() as usize;
    let end = start + at.get().len();
    let line_start = text[..start].rfind('\n').map_or(0, |i| i + 1);
    let indent: String = text[line_start..start].chars().take_while(|c| *c == ' ').collect();
    let pretty = serde_json::to_string_pretty(new).map_err(|e| e.to_string())?;
    let body = pretty.replace('\n', &format!("\n{indent}"));
    Ok(format!("{}{body}{}", &text[..start], &text[end..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_value_on_the_path_changes() {
        let text = "{\n  \"a\": 0.1000000000000000055511151231257827,\n  \"list\": [\n    {\n      \"x\": null,\n      \"y\": 2.5\n    }\n  ]\n}\n";
        let new = serde_json::json!({"k": "v", "n": 1});
        let out = replace(text, &[Step::Key("list"), Step::Index(0), Step::Key("x")], &new)
            .expect("replaced");
        assert_eq!(
            out,
            "{\n  \"a\": 0.1000000000000000055511151231257827,\n  \"list\": [\n    {\n      \"x\": {\n        \"k\": \"v\",\n        \"n\": 1\n      },\n      \"y\": 2.5\n    }\n  ]\n}\n"
        );
        let back = replace(
            &out,
            &[Step::Key("list"), Step::Index(0), Step::Key("x")],
            &serde_json::Value::Null,
        )
        .expect("back");
        assert_eq!(back, text);
        assert!(replace(text, &[Step::Key("nope")], &new).is_err());
    }
}

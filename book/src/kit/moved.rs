//! A claim that moves with upstream: a snapshot's text on the old release and on the new one,
//! and the unified diff a reviewer sees when `cargo test` re-runs it.
//!
//! No upstream file: this is the book's own machinery, for chapter 13 ("When upstream moves").
//!
//! # Invariants
//!
//! 1. A [`Moved`] is the same experiment run twice, once per release, by one function: the
//!    only input that differs is the [`Release`].
//! 2. [`Moved::assert_moved`] fails unless the two texts differ, the diff removes and adds
//!    exactly the lines the caller names, and the new text is the accepted snapshot (what
//!    `snapshots/NAME.snap` holds), so the diff a chapter shows is the one that was reviewed.
//! 3. [`Moved::assert_unchanged`] fails unless the two texts are equal.

use serde::Serialize;
use similar::{ChangeTag, TextDiff};

use super::snap;
use controlloop::controller::Release;

/// One snapshot's text on two releases.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Moved {
    /// The snapshot's name (`snapshots/NAME.snap`).
    pub name: String,
    /// The release the book followed before, and the text it gave.
    pub old: (Release, String),
    /// The release the book follows now, and the text it gives.
    pub new: (Release, String),
}

impl Moved {
    /// Runs `run` on `from` and on `to` (keeps I1).
    pub fn between(
        name: &str,
        from: Release,
        to: Release,
        run: impl Fn(Release) -> String,
    ) -> Self {
        Self {
            name: name.to_owned(),
            old: (from, run(from)),
            new: (to, run(to)),
        }
    }

    /// The unified diff from the old text to the new, as `cargo insta review` shows a moved
    /// snapshot: `-` lines the old release gave, `+` lines the new one gives.
    pub fn diff(&self) -> String {
        let header = |r: Release| format!("snapshots/{}.snap ({r})", self.name);
        TextDiff::from_lines(&self.old.1, &self.new.1)
            .unified_diff()
            .context_radius(1)
            .header(&header(self.old.0), &header(self.new.0))
            .to_string()
    }

    /// The lines the diff removes and the lines it adds, without their line ends.
    pub fn changes(&self) -> (Vec<String>, Vec<String>) {
        let (mut removed, mut added) = (Vec::new(), Vec::new());
        for change in TextDiff::from_lines(&self.old.1, &self.new.1).iter_all_changes() {
            let line = change.value().trim_end_matches('\n').to_owned();
            match change.tag() {
                ChangeTag::Delete => removed.push(line),
                ChangeTag::Insert => added.push(line),
                ChangeTag::Equal => {}
            }
        }
        (removed, added)
    }

    /// Panics unless the snapshot moved, exactly as `removed` → `added`, to the accepted text
    /// (keeps I2).
    pub fn assert_moved(&self, removed: &[&str], added: &[&str]) {
        let (name, (old, _), (new, text)) = (&self.name, &self.old, &self.new);
        assert!(
            self.old.1 != self.new.1,
            "{name} did not move between {old} and {new}: there is no diff to review"
        );
        let (r, a) = self.changes();
        assert!(
            r == removed && a == added,
            "{name} moved differently: expected -{removed:?} +{added:?}; the diff is:\n{}",
            self.diff()
        );
        let stored = snap::stored(name);
        assert!(
            stored.as_deref().map(str::trim_end) == Some(text.trim_end()),
            "{name}: the {new} text is not the accepted snapshot; run the chapter that shows \
             it, review and accept"
        );
    }

    /// Panics unless the two releases give the same text (keeps I3).
    pub fn assert_unchanged(&self) {
        assert!(
            self.old.1 == self.new.1,
            "{} moved between {} and {}:\n{}",
            self.name,
            self.old.0,
            self.new.0,
            self.diff()
        );
    }
}

/// A flat struct as the YAML lines a snapshot of it holds (`field: value` in the struct's
/// order, `~` for none), so a YAML snapshot can be diffed like a text one.
pub fn flat_yaml(value: &impl Serialize) -> String {
    let json = serde_json::to_string(value).expect("serialisable");
    let Fields(fields) = serde_json::from_str(&json).expect("a flat struct");
    fields
        .iter()
        .map(|(k, v)| match v {
            serde_json::Value::String(s) => format!("{k}: {s}\n"),
            serde_json::Value::Null => format!("{k}: ~\n"),
            other => format!("{k}: {other}\n"),
        })
        .collect()
}

/// A JSON object's fields in the order they were written (`serde_json::Map` sorts them).
struct Fields(Vec<(String, serde_json::Value)>);

impl<'de> serde::Deserialize<'de> for Fields {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct InOrder;
        impl<'de> serde::de::Visitor<'de> for InOrder {
            type Value = Fields;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a struct")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut m: A) -> Result<Fields, A::Error> {
                let mut fields = Vec::new();
                while let Some(field) = m.next_entry()? {
                    fields.push(field);
                }
                Ok(Fields(fields))
            }
        }
        d.deserialize_map(InOrder)
    }
}

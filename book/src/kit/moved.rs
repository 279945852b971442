//! A claim that moves with upstream: a snapshot's text on the old release and on the new one,
//! and the unified diff a reviewer sees when `cargo test` re-runs it.
//!
//! No upstream file: this is the book's own machinery, for chapter 13 ("When upstream moves").
//! A side is a controller-runtime [`Release`] of the port, whose accepted text is a snapshot,
//! or a client-go minor the port follows ([`ClientGo`]), whose accepted text is the scenario
//! recorded on that client-go tag (`upstream/recorded/client_go_v0.MINOR_NAME.txt`).
//!
//! # Invariants
//!
//! 1. A [`Moved`] is the same experiment run twice, once per side, by one function: the
//!    only input that differs is the side.
//! 2. [`Moved::assert_moved`] fails unless the two texts differ, the diff removes and adds
//!    exactly the lines the caller names, and the new text is the accepted one (what
//!    `snapshots/NAME.snap` holds, or the recording on the new tag; on a [`ClientGo`] side the
//!    old text must be the old tag's recording too), so the diff a chapter shows is the one
//!    that was reviewed, or the one upstream's own tags give.
//! 3. [`Moved::assert_unchanged`] fails unless the two texts are equal.

use std::fmt;

use serde::Serialize;
use similar::{ChangeTag, TextDiff};

use super::recorded::Recording;
use super::snap;
use controlloop::controller::Release;

/// What a side of a [`Moved`] is, and where its accepted text is kept.
pub trait Side: Copy + fmt::Display {
    /// What the accepted text is, in a failure's message (`snapshot`, `recording`).
    const ACCEPTED: &'static str;
    /// Whether the old side's text is checked against its accepted text too.
    const CHECKS_OLD: bool;
    /// The diff's header for this side's text of `name`.
    fn header(self, name: &str) -> String;
    /// The accepted text of `name` on this side, if there is one.
    fn accepted(self, name: &str) -> Option<String>;
}

impl Side for Release {
    const ACCEPTED: &'static str = "snapshot";
    const CHECKS_OLD: bool = false; // the snapshot holds the new release's text only
    fn header(self, name: &str) -> String {
        format!("snapshots/{name}.snap ({self})")
    }
    fn accepted(self, name: &str) -> Option<String> {
        snap::stored(name)
    }
}

/// The port following client-go `v0.MINOR` (its informer's gates at 1.MINOR,
/// `FeatureGates::at_minor`; its elector's `client_go_minor`), beside the scenario recorded on
/// that tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientGo(pub u32);

/// Where a recording runs a part the port has no counterpart of: client-go's
/// `NewInformerWithOptions`, whose handler runs on the processing goroutine. The port's text
/// is compared with the part before it.
pub const NOT_PORTED_PART: &str = "informer of NewInformerWithOptions";

/// A recorded body up to [`NOT_PORTED_PART`]: what the port runs of it.
pub fn ported_part(body: &str) -> String {
    let part = body.lines().take_while(|l| !l.starts_with(NOT_PORTED_PART));
    part.map(|l| format!("{l}\n")).collect()
}

impl ClientGo {
    /// The recording of `name` on this tag: `client_go_v0.MINOR_NAME`.
    pub fn recording(self, name: &str) -> String {
        format!("client_go_v0.{}_{name}", self.0)
    }

    /// The body of `name` as recorded on this tag, a line each, if it was recorded there.
    pub fn recorded(self, name: &str) -> Option<String> {
        let name = self.recording(name);
        Recording::exists(&name).then(|| {
            let body = Recording::read(&name).body;
            body.iter().map(|l| format!("{l}\n")).collect()
        })
    }
}

impl fmt::Display for ClientGo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "1.{}", self.0)
    }
}

impl Side for ClientGo {
    const ACCEPTED: &'static str = "recording";
    const CHECKS_OLD: bool = true; // both tags are recorded
    fn header(self, name: &str) -> String {
        format!("{} (this crate at {self})", self.recording(name))
    }
    fn accepted(self, name: &str) -> Option<String> {
        self.recorded(name).as_deref().map(ported_part)
    }
}

/// One snapshot's text on two sides: two releases of the port, or two client-go minors.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Moved<R = Release> {
    /// The snapshot's name (`snapshots/NAME.snap`), or the recorded scenario's.
    pub name: String,
    /// The side the book followed before, and the text it gave.
    pub old: (R, String),
    /// The side the book follows now, and the text it gives.
    pub new: (R, String),
}

impl<R: Side> Moved<R> {
    /// Runs `run` on `from` and on `to` (keeps I1).
    pub fn between(name: &str, from: R, to: R, run: impl Fn(R) -> String) -> Self {
        Self {
            name: name.to_owned(),
            old: (from, run(from)),
            new: (to, run(to)),
        }
    }

    /// The unified diff from the old text to the new, as `cargo insta review` shows a moved
    /// snapshot: `-` lines the old release gave, `+` lines the new one gives.
    pub fn diff(&self) -> String {
        TextDiff::from_lines(&self.old.1, &self.new.1)
            .unified_diff()
            .context_radius(1)
            .header(
                &self.old.0.header(&self.name),
                &self.new.0.header(&self.name),
            )
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
        let (name, (old, _), (new, _)) = (&self.name, &self.old, &self.new);
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
        if let Err(e) = self.accepted() {
            panic!("{e}");
        }
    }

    /// Whether the new text is the accepted one, and on a side that checks it, the old text
    /// too (I2's last part); the error says which is not.
    pub fn accepted(&self) -> Result<(), String> {
        let (name, accepted) = (&self.name, R::ACCEPTED);
        let is = |(side, text): &(R, String)| {
            side.accepted(name).as_deref().map(str::trim_end) == Some(text.trim_end())
        };
        if !is(&self.new) {
            return Err(format!(
                "{name}: the {} text is not the accepted {accepted}; run the chapter that shows \
                 it, review and accept",
                self.new.0
            ));
        }
        if R::CHECKS_OLD && !is(&self.old) {
            return Err(format!(
                "{name}: the {} text is not the accepted {accepted}",
                self.old.0
            ));
        }
        Ok(())
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

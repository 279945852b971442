//! A watch event's type, shared by the two clusters (the API server and the fake clientset),
//! which import nothing of each other. Follows apimachinery's `watch.EventType` in
//! `pkg/watch/watch.go` (v0.37), without `BOOKMARK` and `ERROR`, which neither cluster stores.
//! Its public path is [`crate::apiserver::EventType`].

/// What happened to an object, as a watch event type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    /// The object was created.
    Added,
    /// The object was changed.
    Modified,
    /// The object was removed.
    Deleted,
}

impl EventType {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
        }
    }
}

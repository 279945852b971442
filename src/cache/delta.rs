//! Deltas: what a FIFO queues, one change to one object, and the tombstone for a deletion seen
//! only by a relist. Follows client-go `tools/cache/delta_fifo.go` (types) and
//! `the_real_fifo.go` (the 1.36 atomic-mode payloads).
//!
//! A [`Delta`] pairs a [`DeltaType`] with a [`DeltaObject`]. Upstream's `Object` field is an
//! `interface{}` that may hold an API object, a [`DeletedFinalStateUnknown`] tombstone, or one of
//! the three atomic-mode payloads; here that is an enum, so a delta can never hold something
//! the informer does not know how to process.
//!
//! # Invariants
//! 1. A [`Deltas`] returned by a Pop is never empty, and is ordered oldest first.
//! 2. A tombstone never wraps another tombstone (the FIFOs unwrap before wrapping).
//!
//! # Differences from upstream
//! - The object is an `Arc<K>`, so "the same object" is checkable with `Arc::ptr_eq` (upstream
//!   compares pointers of `interface{}` values).
//! - `DeltaObject::Object` can never hold a tombstone; a tombstone has its own variant.

use std::{fmt, sync::Arc};

/// What kind of change a [`Delta`] records. The names and their order are upstream's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
pub enum DeltaType {
    /// The object was created (a watch ADDED event).
    Added,
    /// The object changed (a watch MODIFIED event).
    Updated,
    /// The object was deleted; the delta carries its last known state or a tombstone.
    Deleted,
    /// The object came from a relist (`Replace`), and the FIFO was asked to say so
    /// (DeltaFIFO's `EmitDeltaTypeReplaced`; RealFIFO always does).
    Replaced,
    /// A whole relist in one delta: RealFIFO in atomic mode (1.36).
    ReplacedAll,
    /// A periodic resync replayed the cached object; also DeltaFIFO's relist items when it does
    /// not emit `Replaced`.
    Sync,
    /// A whole resync in one delta: RealFIFO in atomic mode (1.36).
    SyncAll,
    /// A watch bookmark carrying a resource version: RealFIFO in atomic mode (1.36).
    Bookmark,
}

impl DeltaType {
    /// Upstream's string constant for this type.
    pub fn as_str(self) -> &'static str {
        match self {
            DeltaType::Added => "Added",
            DeltaType::Updated => "Updated",
            DeltaType::Deleted => "Deleted",
            DeltaType::Replaced => "Replaced",
            DeltaType::ReplacedAll => "ReplacedAll",
            DeltaType::Sync => "Sync",
            DeltaType::SyncAll => "SyncAll",
            DeltaType::Bookmark => "Bookmark",
        }
    }

    /// Whether RealFIFO's `PopBatch` may put this type in a batch with others. The three
    /// atomic-mode types always travel alone.
    pub fn is_batchable(self) -> bool {
        !matches!(
            self,
            DeltaType::ReplacedAll | DeltaType::SyncAll | DeltaType::Bookmark
        )
    }
}

impl fmt::Display for DeltaType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A deletion the client inferred from a relist rather than saw: the object was in the cache
/// (or the queue) but not in the new list. `obj` is the last state known, which may be stale,
/// or `None` when nothing was known.
#[derive(Debug)]
pub struct DeletedFinalStateUnknown<K> {
    /// The object's key (`namespace/name`).
    pub key: String,
    /// The last known state, if any.
    pub obj: Option<Arc<K>>,
}

// Manual impls: deriving would demand `K: Clone` / `K: PartialEq` for the `Arc`.
impl<K> Clone for DeletedFinalStateUnknown<K> {
    fn clone(&self) -> Self {
        DeletedFinalStateUnknown {
            key: self.key.clone(),
            obj: self.obj.clone(),
        }
    }
}

impl<K: PartialEq> PartialEq for DeletedFinalStateUnknown<K> {
    fn eq(&self, other: &Self) -> bool {
        self.key == other.key && self.obj == other.obj
    }
}

/// The payload of a `ReplacedAll` delta: a whole list and the resource version it was read at.
#[derive(Debug)]
pub struct ReplacedAllInfo<K> {
    /// The list's resource version.
    pub resource_version: String,
    /// Every object in the list, in list order.
    pub objects: Vec<Arc<K>>,
}

impl<K> Clone for ReplacedAllInfo<K> {
    fn clone(&self) -> Self {
        ReplacedAllInfo {
            resource_version: self.resource_version.clone(),
            objects: self.objects.clone(),
        }
    }
}

impl<K: PartialEq> PartialEq for ReplacedAllInfo<K> {
    fn eq(&self, other: &Self) -> bool {
        self.resource_version == other.resource_version && self.objects == other.objects
    }
}

/// The payload of a `Bookmark` delta.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BookmarkInfo {
    /// The bookmark's resource version.
    pub resource_version: String,
}

/// What a delta carries.
#[derive(Debug)]
pub enum DeltaObject<K> {
    /// An API object: the state after the change (for `Deleted`, the last known state).
    Object(Arc<K>),
    /// A deletion found by a relist.
    Tombstone(DeletedFinalStateUnknown<K>),
    /// A whole relist (atomic mode).
    ReplacedAll(ReplacedAllInfo<K>),
    /// A whole resync (atomic mode); upstream's empty `SyncAllInfo{}`.
    SyncAll,
    /// A bookmark (atomic mode).
    Bookmark(BookmarkInfo),
}

impl<K> Clone for DeltaObject<K> {
    fn clone(&self) -> Self {
        match self {
            DeltaObject::Object(o) => DeltaObject::Object(o.clone()),
            DeltaObject::Tombstone(t) => DeltaObject::Tombstone(t.clone()),
            DeltaObject::ReplacedAll(r) => DeltaObject::ReplacedAll(r.clone()),
            DeltaObject::SyncAll => DeltaObject::SyncAll,
            DeltaObject::Bookmark(b) => DeltaObject::Bookmark(b.clone()),
        }
    }
}

impl<K: PartialEq> PartialEq for DeltaObject<K> {
    fn eq(&self, other: &Self) -> bool {
        use DeltaObject::*;
        match (self, other) {
            (Object(a), Object(b)) => a == b,
            (Tombstone(a), Tombstone(b)) => a == b,
            (ReplacedAll(a), ReplacedAll(b)) => a == b,
            (SyncAll, SyncAll) => true,
            (Bookmark(a), Bookmark(b)) => a == b,
            _ => false,
        }
    }
}

impl<K> DeltaObject<K> {
    /// The API object, if this is one.
    pub fn object(&self) -> Option<&Arc<K>> {
        match self {
            DeltaObject::Object(o) => Some(o),
            _ => None,
        }
    }

    /// The tombstone, if this is one.
    pub fn tombstone(&self) -> Option<&DeletedFinalStateUnknown<K>> {
        match self {
            DeltaObject::Tombstone(t) => Some(t),
            _ => None,
        }
    }

    /// The object a deletion should carry: an object as is; a tombstone's inner object (so
    /// tombstones are never nested, keeps I2).
    pub(crate) fn unwrapped_object(&self) -> Option<Arc<K>> {
        match self {
            DeltaObject::Object(o) => Some(o.clone()),
            DeltaObject::Tombstone(t) => t.obj.clone(),
            _ => None,
        }
    }
}

/// One change to one object.
#[derive(Debug)]
pub struct Delta<K> {
    /// What happened.
    pub delta_type: DeltaType,
    /// What it happened to.
    pub object: DeltaObject<K>,
}

impl<K> Clone for Delta<K> {
    fn clone(&self) -> Self {
        Delta {
            delta_type: self.delta_type,
            object: self.object.clone(),
        }
    }
}

impl<K: PartialEq> PartialEq for Delta<K> {
    fn eq(&self, other: &Self) -> bool {
        self.delta_type == other.delta_type && self.object == other.object
    }
}

impl<K> Delta<K> {
    /// A delta of `delta_type` carrying the API object `obj`.
    pub fn new(delta_type: DeltaType, obj: Arc<K>) -> Self {
        Delta {
            delta_type,
            object: DeltaObject::Object(obj),
        }
    }

    /// A `Deleted` delta carrying a tombstone.
    pub fn tombstone(key: impl Into<String>, obj: Option<Arc<K>>) -> Self {
        Delta {
            delta_type: DeltaType::Deleted,
            object: DeltaObject::Tombstone(DeletedFinalStateUnknown {
                key: key.into(),
                obj,
            }),
        }
    }
}

/// The deltas one Pop hands out, oldest first: all of one key's for DeltaFIFO, exactly one
/// for RealFIFO's `Pop`.
#[derive(Debug)]
pub struct Deltas<K>(pub Vec<Delta<K>>);

impl<K> Clone for Deltas<K> {
    fn clone(&self) -> Self {
        Deltas(self.0.clone())
    }
}

impl<K: PartialEq> PartialEq for Deltas<K> {
    fn eq(&self, other: &Self) -> bool {
        self.0 == other.0
    }
}

impl<K> Default for Deltas<K> {
    fn default() -> Self {
        Deltas(Vec::new())
    }
}

impl<K> Deltas<K> {
    /// The oldest delta, or `None` if empty.
    pub fn oldest(&self) -> Option<&Delta<K>> {
        self.0.first()
    }

    /// The newest delta, or `None` if empty.
    pub fn newest(&self) -> Option<&Delta<K>> {
        self.0.last()
    }

    /// How many deltas.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The deltas, oldest first.
    pub fn iter(&self) -> std::slice::Iter<'_, Delta<K>> {
        self.0.iter()
    }
}

impl<K> From<Vec<Delta<K>>> for Deltas<K> {
    fn from(v: Vec<Delta<K>>) -> Self {
        Deltas(v)
    }
}

impl<'a, K> IntoIterator for &'a Deltas<K> {
    type Item = &'a Delta<K>;
    type IntoIter = std::slice::Iter<'a, Delta<K>>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

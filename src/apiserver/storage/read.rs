//! Reads of storage: the state at a revision, pages, and the events after a revision.
//!
//! Follows etcd's MVCC reads as `storage/etcd3` uses them: a list at revision `r` sees every
//! write up to `r` and none after; a range is read in key order, `limit` keys at a time, the
//! next page continuing after the last key. The state at an old revision is the current
//! state with the later writes undone, so no old version is kept twice.
//!
//! # Concurrency
//! Called under the storage lock, where a read only walks the maps and clones `Arc`s, one
//! bounded batch at a time ([`Storage::scan`]); filtering by a selector and serialising run on
//! the batch after the lock is released.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;

use super::{Event, Key, Storage, Stored};
use crate::apiserver::errors::ApiError;

/// One page of a list (for tests of the state at a revision).
#[cfg(test)]
#[derive(Debug)]
pub(crate) struct Page {
    pub items: Vec<Arc<Stored>>,
}

/// One batch of a range read ([`Storage::scan`]).
#[derive(Debug)]
pub(crate) struct Batch {
    /// The objects, in key order.
    pub items: Vec<Arc<Stored>>,
    /// Whether the range holds more objects after the last one.
    pub more: bool,
}

impl Storage {
    fn expired(&self, rv: u64) -> ApiError {
        ApiError::expired(format!(
            "too old resource version: {rv} (compacted up to {})",
            self.compacted
        ))
    }

    /// Up to `max` events after revision `after`, or 410 if some were compacted away.
    pub fn events_after(&self, after: u64, max: usize) -> Result<Vec<Arc<Event>>, ApiError> {
        if after < self.compacted {
            return Err(self.expired(after));
        }
        // I2: index of revision after + 1; a revision beyond the head skips everything.
        let skip = usize::try_from(after - self.compacted).unwrap_or(usize::MAX);
        Ok(self.history.iter().skip(skip).take(max).cloned().collect())
    }

    /// Checks a requested revision for a read: 410 if compacted, 504 if in the future.
    pub fn check_readable(&self, rv: u64) -> Result<(), ApiError> {
        if rv < self.compacted {
            Err(self.expired(rv))
        } else if rv > self.head {
            Err(ApiError::too_large_resource_version(rv, self.head))
        } else {
            Ok(())
        }
    }

    /// The number of `kind` objects stored now.
    pub fn count(&self, kind: usize) -> usize {
        self.objects[kind].len()
    }

    /// Up to `max_items` `kind` objects in `ns` (all namespaces if `None`) as of revision `rv`,
    /// in key order, strictly after key `after`; a batch stops early once its objects' JSON
    /// reaches `max_bytes` (it always holds one object if any is left).
    ///
    /// The walk seeks to `after` (a range of the sorted map) rather than walking from the first
    /// key, so reading a long list batch by batch, or page by page with continue tokens, costs
    /// the items read, not the items before them. The state at an old revision is the current
    /// state with the later writes of this kind undone; building that overlay costs the events
    /// after `rv`, which the history bounds.
    pub fn scan(
        &self,
        kind: usize,
        ns: Option<&str>,
        rv: u64,
        after: Option<&Key>,
        max_items: usize,
        max_bytes: usize,
    ) -> Result<Batch, ApiError> {
        self.check_readable(rv)?;
        let floor = ns.map(|n| (n.to_string(), String::new()));
        let lower: Bound<&Key> = match (after, &floor) {
            (Some(a), Some(f)) if a < f => Bound::Included(f),
            (Some(a), _) => Bound::Excluded(a),
            (None, Some(f)) => Bound::Included(f),
            (None, None) => Bound::Unbounded,
        };
        let in_ns = |k: &Key| ns.is_none_or(|n| k.0 == n);
        let later = self.events_after(rv, usize::MAX)?;
        // The first later write to a key tells what the key held at `rv`.
        let mut overlay: BTreeMap<&Key, Option<&Arc<Stored>>> = BTreeMap::new();
        for e in later.iter().filter(|e| e.kind == kind) {
            let past = match lower {
                Bound::Included(l) => &e.key < l,
                Bound::Excluded(l) => &e.key <= l,
                Bound::Unbounded => false,
            };
            if !past && in_ns(&e.key) {
                overlay.entry(&e.key).or_insert(e.prev.as_ref());
            }
        }
        let current = self.objects[kind]
            .range::<Key, _>((lower, Bound::Unbounded))
            .take_while(|(k, _)| in_ns(k))
            .map(|(k, v)| (k, Some(v)));
        let undone = overlay.iter().map(|(k, v)| (*k, *v));
        let mut merged = merge_by_key(current, undone).filter_map(|(_, v)| v.cloned());
        let mut items = Vec::new();
        let mut bytes = 0usize;
        for o in merged.by_ref() {
            bytes = bytes.saturating_add(o.json.len());
            items.push(o);
            if items.len() >= max_items || bytes >= max_bytes {
                break;
            }
        }
        let more = merged.next().is_some();
        Ok(Batch { items, more })
    }

    /// One page of `kind` objects in `ns` (all namespaces if `None`) as of revision `at`
    /// (the head if `None`), after key `after`, at most `limit` (none or 0: all).
    #[cfg(test)]
    pub fn list(
        &self,
        kind: usize,
        ns: Option<&str>,
        at: Option<u64>,
        after: Option<&Key>,
        limit: Option<usize>,
    ) -> Result<Page, ApiError> {
        let rv = at.unwrap_or(self.head);
        let limit = limit.filter(|l| *l > 0).unwrap_or(usize::MAX);
        let batch = self.scan(kind, ns, rv, after, limit, usize::MAX)?;
        Ok(Page { items: batch.items })
    }
}

/// Merges two key-sorted streams; on equal keys the second wins.
fn merge_by_key<'a, A, B, V>(a: A, b: B) -> impl Iterator<Item = (&'a Key, V)>
where
    A: Iterator<Item = (&'a Key, V)>,
    B: Iterator<Item = (&'a Key, V)>,
{
    let mut a = a.peekable();
    let mut b = b.peekable();
    std::iter::from_fn(move || match (a.peek(), b.peek()) {
        (Some((ka, _)), Some((kb, _))) => {
            if ka < kb {
                a.next()
            } else {
                if ka == kb {
                    a.next();
                }
                b.next()
            }
        }
        (Some(_), None) => a.next(),
        (None, _) => b.next(),
    })
}

//! Reads of storage: the state at a revision, pages, and the events after a revision.
//!
//! Follows etcd's MVCC reads as `storage/etcd3` uses them: a list at revision `r` sees every
//! write up to `r` and none after; a range is read in key order, `limit` keys at a time, the
//! next page continuing after the last key. The state at an old revision is the current
//! state with the later writes undone, so no old version is kept twice.
//!
//! # Concurrency
//! Called under the storage lock, where a read only walks the maps and clones `Arc`s;
//! filtering by a selector runs on the snapshot after the lock is released ([`Page::select`]).

use std::collections::BTreeMap;
use std::sync::Arc;

use super::{Event, Key, Storage, Stored};
use crate::apiserver::errors::ApiError;

/// One page of a list.
#[derive(Debug)]
pub(crate) struct Page {
    pub items: Vec<Arc<Stored>>,
    /// The revision the page was read at.
    pub rv: u64,
    /// Set when more items follow: the key to continue after.
    pub continue_after: Option<Key>,
}

impl Page {
    /// Keeps the items `keep` accepts, at most `limit` of them (none or 0: all), and sets the
    /// continue key. Called on a complete page, without the storage lock.
    pub fn select(self, limit: Option<usize>, keep: impl Fn(&Stored) -> bool) -> Page {
        paginate(self.items.into_iter(), self.rv, limit, keep)
    }
}

/// The first `limit` items `keep` accepts (none or 0: all), stopping as soon as it knows
/// whether more follow.
fn paginate(
    items: impl Iterator<Item = Arc<Stored>>,
    rv: u64,
    limit: Option<usize>,
    keep: impl Fn(&Stored) -> bool,
) -> Page {
    let limit = limit.filter(|l| *l > 0).unwrap_or(usize::MAX);
    let mut out = Vec::new();
    let mut rest = items.filter(|o| keep(o));
    for o in rest.by_ref() {
        out.push(o);
        if out.len() == limit {
            break;
        }
    }
    let more = out.len() == limit && rest.next().is_some();
    let continue_after = if more {
        out.last().map(|o| o.key())
    } else {
        None
    };
    Page {
        items: out,
        rv,
        continue_after,
    }
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

    /// One page of `kind` objects in `ns` (all namespaces if `None`) as of revision `at`
    /// (the head if `None`), after key `after`, at most `limit` (none or 0: all).
    pub fn list(
        &self,
        kind: usize,
        ns: Option<&str>,
        at: Option<u64>,
        after: Option<&Key>,
        limit: Option<usize>,
    ) -> Result<Page, ApiError> {
        let rv = at.unwrap_or(self.head);
        self.check_readable(rv)?;
        // The state at `rv` is the current state with the writes after `rv` undone: the first
        // later write to a key tells what the key held at `rv`.
        let later = self.events_after(rv, usize::MAX)?;
        let mut overlay: BTreeMap<&Key, Option<&Arc<Stored>>> = BTreeMap::new();
        for e in later.iter().filter(|e| e.kind == kind) {
            overlay.entry(&e.key).or_insert(e.prev.as_ref());
        }
        let in_scope = |k: &Key| ns.is_none_or(|n| k.0 == n) && after.is_none_or(|a| k > a);
        let current = self.objects[kind]
            .iter()
            .filter(|(k, _)| in_scope(k))
            .map(|(k, v)| (k, Some(v)));
        let undone = overlay
            .iter()
            .filter(|(k, _)| in_scope(k))
            .map(|(k, v)| (*k, *v));
        let merged = merge_by_key(current, undone).filter_map(|(_, v)| v.cloned());
        Ok(paginate(merged, rv, limit, |_| true))
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

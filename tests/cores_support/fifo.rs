//! What the two FIFO checks share: the objects, the known-objects store, the operations and
//! their decoding, and deltas as the models see them.
//!
//! An object is a cluster-scoped `ConfigMap` named after its key (`a` … `e`) with `data.v`, its
//! version, so its key is its name. A sixth name, `!`, is refused by the key function: the
//! FIFOs' key-error paths. The known objects (the informer's indexer, in an informer) are a
//! [`KnownStore`] whose keys list in name order and whose lookups can fail or miss a listed
//! key, as a real indexer can between `ListKeys` and `GetByKey`.

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex},
};

use controlloop::cache::{
    Delta, DeltaObject, DeltaType, KeyError, KeyFunc, KeyListerGetter, LookupError, PopError,
};
use k8s_openapi::{api::core::v1::ConfigMap, apimachinery::pkg::apis::meta::v1::ObjectMeta};

use super::Bytes;

/// Names `0..KEYS`; the last one's key cannot be made.
pub const NAMES: [&str; 6] = ["a", "b", "c", "d", "e", "!"];
/// How many names.
pub const KEYS: u8 = NAMES.len() as u8;
/// The name the key function refuses.
pub const BAD: u8 = KEYS - 1;

/// An object as the models see it: which name, which version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Ob {
    /// Index into [`NAMES`].
    pub key: u8,
    /// `data.v`.
    pub ver: u8,
}

impl Ob {
    /// The object itself.
    pub fn object(self) -> Arc<ConfigMap> {
        Arc::new(ConfigMap {
            metadata: ObjectMeta {
                name: Some(NAMES[usize::from(self.key)].to_owned()),
                ..Default::default()
            },
            data: Some([("v".to_owned(), self.ver.to_string())].into()),
            ..Default::default()
        })
    }

    fn of(o: &ConfigMap) -> Ob {
        let name = o.metadata.name.as_deref().unwrap_or_default();
        let ver = o
            .data
            .as_ref()
            .and_then(|d| d.get("v"))
            .map(|v| v.parse().expect("data.v is a u8"));
        Ob {
            key: key_index(name),
            ver: ver.expect("every object has data.v"),
        }
    }
}

fn key_index(name: &str) -> u8 {
    NAMES.iter().position(|n| *n == name).expect("a known name") as u8
}

/// The key function: the name, except that `!` has none.
pub fn key_fn() -> KeyFunc<ConfigMap> {
    Arc::new(|o: &ConfigMap| match o.metadata.name.as_deref() {
        Some("!") => Err(KeyError {
            object: "!".into(),
            reason: "the fuzz key function refuses it".into(),
        }),
        name => Ok(name.unwrap_or_default().to_owned()),
    })
}

/// What a known object looks like on a lookup.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Known {
    /// Not listed.
    Absent,
    /// Listed and found, at this version.
    Present(u8),
    /// Listed, but the lookup fails.
    Failing,
    /// Listed, but the lookup finds nothing (deleted between the two calls).
    Phantom,
}

/// The known-objects store both a FIFO and its model read.
#[derive(Debug, Default)]
pub struct KnownStore(Mutex<BTreeMap<u8, Known>>);

impl KnownStore {
    /// Sets what `key` looks like.
    pub fn set(&self, key: u8, known: Known) {
        let mut m = self.0.lock().unwrap();
        if known == Known::Absent {
            m.remove(&key);
        } else {
            m.insert(key, known);
        }
    }

    /// The listed keys, in name order.
    pub fn keys(&self) -> Vec<u8> {
        self.0.lock().unwrap().keys().copied().collect()
    }

    /// A lookup as the model sees it: `Err(())` for a failing one.
    pub fn get(&self, key: u8) -> Result<Option<Ob>, ()> {
        match self.0.lock().unwrap().get(&key) {
            None | Some(Known::Absent | Known::Phantom) => Ok(None),
            Some(Known::Present(ver)) => Ok(Some(Ob { key, ver: *ver })),
            Some(Known::Failing) => Err(()),
        }
    }
}

impl KeyListerGetter<ConfigMap> for KnownStore {
    fn list_keys(&self) -> Vec<String> {
        self.keys()
            .into_iter()
            .map(|k| NAMES[usize::from(k)].to_owned())
            .collect()
    }

    fn get_by_key(&self, key: &str) -> Result<Option<Arc<ConfigMap>>, LookupError> {
        match self.get(key_index(key)) {
            Ok(o) => Ok(o.map(Ob::object)),
            Err(()) => Err(LookupError {
                key: key.to_owned(),
                reason: "the fuzz store fails this lookup".into(),
            }),
        }
    }
}

/// What a delta carries, as the models see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Payload {
    /// An object.
    Obj(Ob),
    /// A tombstone: its key and the last state known.
    Tomb(u8, Option<Ob>),
    /// A whole relist: its resource version and objects.
    All(String, Vec<Ob>),
    /// A whole resync.
    SyncAll,
    /// A bookmark's resource version.
    Bookmark(String),
}

/// A delta as the models see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct D {
    /// Its type.
    pub ty: DeltaType,
    /// Its payload.
    pub payload: Payload,
}

impl D {
    /// A delta carrying `o`.
    pub fn obj(ty: DeltaType, o: Ob) -> D {
        D {
            ty,
            payload: Payload::Obj(o),
        }
    }

    /// A `Deleted` tombstone for `key`.
    pub fn tomb(key: u8, last: Option<Ob>) -> D {
        D {
            ty: DeltaType::Deleted,
            payload: Payload::Tomb(key, last),
        }
    }

    /// The key of what it carries; `None` for the atomic-mode payloads.
    pub fn key(&self) -> Option<u8> {
        match &self.payload {
            Payload::Obj(o) => Some(o.key),
            Payload::Tomb(k, _) => Some(*k),
            _ => None,
        }
    }

    /// The object a deletion of this key would carry: the object, or a tombstone's.
    pub fn last_object(&self) -> Option<Ob> {
        match &self.payload {
            Payload::Obj(o) => Some(*o),
            Payload::Tomb(_, o) => *o,
            _ => None,
        }
    }

    /// A core's delta, read.
    pub fn of(d: &Delta<ConfigMap>) -> D {
        let payload = match &d.object {
            DeltaObject::Object(o) => Payload::Obj(Ob::of(o)),
            DeltaObject::Tombstone(t) => {
                Payload::Tomb(key_index(&t.key), t.obj.as_deref().map(Ob::of))
            }
            DeltaObject::ReplacedAll(r) => Payload::All(
                r.resource_version.clone(),
                r.objects.iter().map(|o| Ob::of(o)).collect(),
            ),
            DeltaObject::SyncAll => Payload::SyncAll,
            DeltaObject::Bookmark(b) => Payload::Bookmark(b.resource_version.clone()),
        };
        D {
            ty: d.delta_type,
            payload,
        }
    }
}

/// One operation on a FIFO or on its known objects.
#[derive(Debug, Clone)]
pub enum FifoOp {
    /// `add`.
    Add(Ob),
    /// `update`.
    Update(Ob),
    /// `delete`.
    Delete(Ob),
    /// `replace(list, rv)`.
    Replace(Vec<Ob>, u8),
    /// `resync`.
    Resync,
    /// `bookmark(rv)`.
    Bookmark(u8),
    /// `try_pop`, whose `process` fails if `fail`.
    Pop {
        /// Whether `process` returns an error.
        fail: bool,
    },
    /// RealFIFO's `try_pop_batch` (a plain `try_pop` on DeltaFIFO).
    PopBatch {
        /// Whether the processing function returns an error.
        fail: bool,
    },
    /// `close`.
    Close,
    /// Changes a known object (only the keyable names).
    Known(u8, Known),
}

/// The strategy-free decoding of one operation, for the fuzz targets.
pub fn decode_op(b: &mut Bytes<'_>) -> FifoOp {
    let ob = |b: &mut Bytes<'_>| Ob {
        key: b.byte() % KEYS,
        ver: b.byte() % 8,
    };
    match b.byte() % 20 {
        0..=2 => FifoOp::Add(ob(b)),
        3..=4 => FifoOp::Update(ob(b)),
        5..=6 => FifoOp::Delete(ob(b)),
        7..=8 => {
            let n = b.byte() % 5;
            let list = (0..n).map(|_| ob(b)).collect();
            FifoOp::Replace(list, b.byte() % 4)
        }
        9 => FifoOp::Resync,
        10 => FifoOp::Bookmark(b.byte() % 4),
        11..=12 => FifoOp::Pop {
            fail: b.byte().is_multiple_of(4),
        },
        13..=14 => FifoOp::PopBatch {
            fail: b.byte().is_multiple_of(4),
        },
        15 => FifoOp::Close,
        _ => {
            let key = b.byte() % BAD;
            let known = match b.byte() % 6 {
                0 => Known::Absent,
                1 => Known::Failing,
                2 => Known::Phantom,
                v => Known::Present(v),
            };
            FifoOp::Known(key, known)
        }
    }
}

/// What one Pop (or batch) handed out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Popped {
    /// Nothing queued, FIFO open: a Pop would wait.
    Nothing,
    /// Nothing queued, FIFO closed.
    Closed,
    /// Deltas, with their initial-list flag; `single` when a batch Pop used its
    /// single-item function; `failed` when `process` returned its error.
    Deltas {
        /// What was handed out, oldest first.
        deltas: Vec<D>,
        /// The initial-list flag `process` received.
        initial: bool,
        /// Whether a batch Pop handed it to the single-item function.
        single: bool,
        /// Whether `process` failed (and the Pop returned its error).
        failed: bool,
    },
}

/// What `process` saw, recorded by [`record`].
pub type Seen = std::cell::RefCell<Option<(Vec<D>, bool, bool)>>;

/// Reads a Pop's result, checking that it returns what `process` was given.
pub fn popped<T: AsRef<[Delta<ConfigMap>]>>(
    r: Option<Result<T, PopError<&'static str>>>,
    seen: &Seen,
) -> Result<Popped, String> {
    let given = seen.borrow_mut().take();
    match (r, given) {
        (None, None) => Ok(Popped::Nothing),
        (Some(Err(PopError::Closed)), None) => Ok(Popped::Closed),
        (Some(Ok(out)), Some((deltas, initial, single))) => {
            let out: Vec<D> = out.as_ref().iter().map(D::of).collect();
            if out != deltas {
                return Err(format!("the Pop returned {out:?} but processed {deltas:?}"));
            }
            Ok(Popped::Deltas {
                deltas,
                initial,
                single,
                failed: false,
            })
        }
        (Some(Err(PopError::Process("fail"))), Some((deltas, initial, single))) => {
            Ok(Popped::Deltas {
                deltas,
                initial,
                single,
                failed: true,
            })
        }
        (r, given) => Err(format!(
            "an inconsistent Pop: returned {:?}, processed {given:?}",
            r.map(|r| r.map(|d| d.as_ref().len()))
        )),
    }
}

/// A `process` function that records what it was given into `seen` and fails if `fail`.
pub fn record(
    seen: &Seen,
    fail: bool,
    single: bool,
) -> impl FnOnce(&[Delta<ConfigMap>], bool) -> Result<(), &'static str> + '_ {
    move |deltas, initial| {
        *seen.borrow_mut() = Some((deltas.iter().map(D::of).collect(), initial, single));
        if fail { Err("fail") } else { Ok(()) }
    }
}

/// Compares whether a producer call succeeded on both sides; counts the model's errors.
pub fn same(core_ok: bool, model_ok: bool, reached: &mut Reached) -> Result<(), (bool, bool)> {
    reached.errors += usize::from(!model_ok);
    if core_ok == model_ok {
        Ok(())
    } else {
        Err((core_ok, model_ok))
    }
}

/// What a FIFO run exercised, so a test can check that its generator reaches every branch.
#[derive(Debug, Default, Clone, Copy)]
pub struct Reached {
    /// Deltas handed out, by type (in [`DeltaType`]'s order).
    pub popped: [usize; 8],
    /// Pops flagged as part of the initial list.
    pub initial: usize,
    /// Pops whose `process` failed.
    pub failed: usize,
    /// Batches of more than one delta.
    pub batches: usize,
    /// Tombstones handed out with an object, and without.
    pub tombstones: [usize; 2],
    /// Producer calls that returned an error.
    pub errors: usize,
    /// Deletes that queued nothing (DeltaFIFO's suppression).
    pub suppressed: usize,
    /// Pops that handed out more than one delta of one key (DeltaFIFO).
    pub grouped: usize,
}

impl Reached {
    /// Adds `other`'s counts to these.
    pub fn merge(&mut self, o: Reached) {
        for (a, b) in self.popped.iter_mut().zip(o.popped) {
            *a += b;
        }
        for (a, b) in self.tombstones.iter_mut().zip(o.tombstones) {
            *a += b;
        }
        self.initial += o.initial;
        self.failed += o.failed;
        self.batches += o.batches;
        self.errors += o.errors;
        self.suppressed += o.suppressed;
        self.grouped += o.grouped;
    }

    /// Counts what `p` handed out.
    pub fn count(&mut self, p: &Popped) {
        let Popped::Deltas {
            deltas,
            initial,
            failed,
            single,
        } = p
        else {
            return;
        };
        for d in deltas {
            self.popped[d.ty as usize] += 1;
            if let Payload::Tomb(_, o) = &d.payload {
                self.tombstones[usize::from(o.is_none())] += 1;
            }
        }
        self.initial += usize::from(*initial);
        self.failed += usize::from(*failed);
        self.batches += usize::from(deltas.len() > 1 && !single);
        self.grouped += usize::from(deltas.len() > 1 && *single);
    }
}

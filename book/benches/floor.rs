//! The floor: what one pass of a key through a workqueue cannot cost less than on this
//! machine, for each kind of key the workqueue benchmarks use.
//!
//! One iteration takes one key by value, as an add does (a copy of a `&'static str`, a clone
//! of a `String` or of a `Request`, as the `/String` and `/Request` rows of
//! `book/benches/workqueue.rs` clone theirs), then, under one uncontended lock/unlock:
//! inserts it into a hash set and removes it again (one hash, reused for both probes, as the
//! queue reuses it for its dirty and processing sets), and pushes it onto a `VecDeque` and pops
//! it off. That is the least that any queue keeping "is it queued?" in a hash set and "in which
//! order?" in a ring buffer must do for a key that goes in and comes out; client-go's queue and
//! the port's `Queue` do more (three lock acquisitions and seven set operations per add, get and
//! done).
//!
//! Rows, each with the key kinds `str` (`&'static str`), `String` and `Request`
//! (`controlloop::controller::Request`), keys `default/obj-NNNNNNN` cycling over 65,536:
//!
//! - `floor/<kind>`: with the primitives `controlloop::workqueue::Queue` is built on (see
//!   `src/workqueue/sync.rs` and `queue_core.rs`): a test-and-set `spin` lock and a hashbrown
//!   `HashTable` with hashbrown's default hasher (foldhash), the key hashed once.
//! - `floor/<kind>/parking_lot_siphash`: the same pass with `parking_lot::Mutex` and the
//!   standard library's `HashSet` (SipHash-1-3, hashing once per probe): what the floor would
//!   be with the obvious primitives.
//!
//! - `floor/duplicate/<kind>`: the least an add of a key that is already queued can cost:
//!   hash the key the caller holds (borrowed, no clone, as `Queue::add_ref` takes it), then,
//!   under the spin lock, find it in a hash set that holds it. The `add_duplicate` rows are
//!   set against it.
//! - `floor/lock`: the spin lock's uncontended lock and unlock alone (one compare-and-swap and
//!   one release store), the part of every row no key kind changes.
//!
//! The floor is an estimate of the lower bound of the single-thread path, not a target: it
//! has no waker, no shutdown check, no second set and a hot cache, and a queue that reached it
//! would have stopped being one.
use std::{
    collections::{HashSet, VecDeque},
    hash::{BuildHasher, Hash},
    hint::black_box,
};

use controlloop::controller::Request;
use criterion::{Criterion, criterion_group, criterion_main};
use hashbrown::{DefaultHashBuilder, HashTable};

const KEYS: usize = 1 << 16;

fn name(i: usize) -> String {
    format!("obj-{i:07}")
}

/// The queue's primitives: one spin lock, one hash for both probes.
struct Ours<K> {
    lock: spin::mutex::SpinMutex<(HashTable<K>, VecDeque<K>), spin::relax::Yield>,
    hasher: DefaultHashBuilder,
}

impl<K: Hash + Eq> Ours<K> {
    fn new() -> Self {
        Ours {
            lock: spin::mutex::SpinMutex::new((HashTable::new(), VecDeque::new())),
            hasher: DefaultHashBuilder::default(),
        }
    }

    /// One pass of `key`: in and out of the set, onto and off the ring buffer. `probe` is an
    /// equal key the caller holds, as a getter holds the key it popped when it takes it out of
    /// the dirty set.
    fn pass(&self, key: K, probe: &K) -> K {
        let hash = self.hasher.hash_one(probe);
        let mut g = self.lock.lock();
        let (set, ring) = &mut *g;
        set.insert_unique(hash, key, |k| self.hasher.hash_one(k));
        let (key, _) = set
            .find_entry(hash, |k| k == probe)
            .ok()
            .expect("just inserted")
            .remove();
        ring.push_back(key);
        ring.pop_front().expect("just pushed")
    }
}

/// The obvious primitives: parking_lot's lock, std's SipHash set.
struct Plain<K> {
    lock: parking_lot::Mutex<(HashSet<K>, VecDeque<K>)>,
}

impl<K: Hash + Eq> Plain<K> {
    fn new() -> Self {
        Plain {
            lock: parking_lot::Mutex::new((HashSet::new(), VecDeque::new())),
        }
    }

    fn pass(&self, key: K, probe: &K) -> K {
        let mut g = self.lock.lock();
        let (set, ring) = &mut *g;
        set.insert(key);
        let key = set.take(probe).expect("just inserted");
        ring.push_back(key);
        ring.pop_front().expect("just pushed")
    }
}

fn rows<K: Hash + Eq + Clone>(c: &mut Criterion, kind: &str, keys: &[K]) {
    let ours = Ours::new();
    let mut i = 0;
    c.bench_function(&format!("floor/{kind}"), |b| {
        b.iter(|| {
            let key = &keys[i % KEYS];
            let k = ours.pass(key.clone(), key);
            i += 1;
            black_box(k)
        })
    });
    let plain = Plain::new();
    c.bench_function(&format!("floor/{kind}/parking_lot_siphash"), |b| {
        b.iter(|| {
            let key = &keys[i % KEYS];
            let k = plain.pass(key.clone(), key);
            i += 1;
            black_box(k)
        })
    });
}

/// A coalescing add at its least: one hash of the borrowed key, one lock, one probe that finds it.
fn duplicate_row<K: Hash + Eq + Clone>(c: &mut Criterion, kind: &str, keys: &[K]) {
    let hasher = DefaultHashBuilder::default();
    let mut set = HashTable::new();
    set.insert_unique(hasher.hash_one(&keys[0]), keys[0].clone(), |k| {
        hasher.hash_one(k)
    });
    let lock = spin::mutex::SpinMutex::<_, spin::relax::Yield>::new(set);
    c.bench_function(&format!("floor/duplicate/{kind}"), |b| {
        b.iter(|| {
            let probe = black_box(&keys[0]);
            let hash = hasher.hash_one(probe);
            let g = lock.lock();
            black_box(g.find(hash, |k| k == probe).is_some())
        })
    });
}

fn floor(c: &mut Criterion) {
    let lock = spin::mutex::SpinMutex::<u64, spin::relax::Yield>::new(0);
    c.bench_function("floor/lock", |b| {
        b.iter(|| {
            let mut g = lock.lock();
            *g = g.wrapping_add(1);
        })
    });
    let strs: Vec<&'static str> = (0..KEYS)
        .map(|i| &*Box::leak(format!("default/{}", name(i)).into_boxed_str()))
        .collect();
    rows(c, "str", &strs);
    duplicate_row(c, "str", &strs);
    let strings: Vec<String> = strs.iter().map(|k| k.to_string()).collect();
    rows(c, "String", &strings);
    duplicate_row(c, "String", &strings);
    let requests: Vec<Request> = (0..KEYS)
        .map(|i| Request::new("default", name(i)))
        .collect();
    rows(c, "Request", &requests);
    duplicate_row(c, "Request", &requests);
}

criterion_group!(benches, floor);
criterion_main!(benches);

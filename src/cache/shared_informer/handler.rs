//! What an informer's handlers receive: [`ResourceEventHandler`], its closure form
//! [`HandlerFuncs`], and [`DeletedObject`]. Follows client-go's `ResourceEventHandler`,
//! `ResourceEventHandlerFuncs` and `DeletedFinalStateUnknown` in
//! `tools/cache/controller.go` and `tools/cache/delta_fifo.go` (v0.37.2).

use std::sync::Arc;

use crate::cache::DeletedFinalStateUnknown;

/// What `on_delete` receives: the object, or a tombstone for a deletion a relist inferred.
#[derive(Debug)]
pub enum DeletedObject<K> {
    /// The last state of the deleted object, from a watch DELETED event.
    Object(Arc<K>),
    /// The object vanished between two lists; `obj` is the last state cached, maybe none.
    Tombstone(DeletedFinalStateUnknown<K>),
}

impl<K> Clone for DeletedObject<K> {
    fn clone(&self) -> Self {
        match self {
            DeletedObject::Object(o) => DeletedObject::Object(o.clone()),
            DeletedObject::Tombstone(t) => DeletedObject::Tombstone(t.clone()),
        }
    }
}

impl<K> DeletedObject<K> {
    /// The object, unwrapping a tombstone (`None` for a tombstone without one).
    pub fn object(&self) -> Option<&Arc<K>> {
        match self {
            DeletedObject::Object(o) => Some(o),
            DeletedObject::Tombstone(t) => t.obj.as_ref(),
        }
    }
    /// Whether this came from a tombstone (controller-runtime's `DeleteStateUnknown`).
    pub fn is_tombstone(&self) -> bool {
        matches!(self, DeletedObject::Tombstone(_))
    }
}

/// A handler of informer notifications (upstream `ResourceEventHandler`). Handlers must not
/// mutate what they receive: it is the cache's own object.
pub trait ResourceEventHandler<K>: Send + Sync + 'static {
    /// An object appeared, from the initial list (`is_in_initial_list`) or later.
    fn on_add(&self, obj: Arc<K>, is_in_initial_list: bool);
    /// An object changed, or a resync replayed it (then `old` and `new` are the same `Arc`).
    fn on_update(&self, old: Arc<K>, new: Arc<K>);
    /// An object went away.
    fn on_delete(&self, obj: DeletedObject<K>);
}

type AddFn<K> = Box<dyn Fn(Arc<K>, bool) + Send + Sync>;
type UpdateFn<K> = Box<dyn Fn(Arc<K>, Arc<K>) + Send + Sync>;
type DeleteFn<K> = Box<dyn Fn(DeletedObject<K>) + Send + Sync>;

/// A handler made of closures; a missing one ignores its notifications (upstream
/// `ResourceEventHandlerFuncs`).
pub struct HandlerFuncs<K> {
    add: Option<AddFn<K>>,
    update: Option<UpdateFn<K>>,
    delete: Option<DeleteFn<K>>,
}

impl<K> Default for HandlerFuncs<K> {
    fn default() -> Self {
        Self {
            add: None,
            update: None,
            delete: None,
        }
    }
}

impl<K> HandlerFuncs<K> {
    /// A handler that ignores everything.
    pub fn new() -> Self {
        Self::default()
    }
    /// Sets `on_add`.
    pub fn on_add(mut self, f: impl Fn(Arc<K>, bool) + Send + Sync + 'static) -> Self {
        self.add = Some(Box::new(f));
        self
    }
    /// Sets `on_update`.
    pub fn on_update(mut self, f: impl Fn(Arc<K>, Arc<K>) + Send + Sync + 'static) -> Self {
        self.update = Some(Box::new(f));
        self
    }
    /// Sets `on_delete`.
    pub fn on_delete(mut self, f: impl Fn(DeletedObject<K>) + Send + Sync + 'static) -> Self {
        self.delete = Some(Box::new(f));
        self
    }
}

impl<K: Send + Sync + 'static> ResourceEventHandler<K> for HandlerFuncs<K> {
    fn on_add(&self, obj: Arc<K>, is_in_initial_list: bool) {
        if let Some(f) = &self.add {
            f(obj, is_in_initial_list)
        }
    }
    fn on_update(&self, old: Arc<K>, new: Arc<K>) {
        if let Some(f) = &self.update {
            f(old, new)
        }
    }
    fn on_delete(&self, obj: DeletedObject<K>) {
        if let Some(f) = &self.delete {
            f(obj)
        }
    }
}

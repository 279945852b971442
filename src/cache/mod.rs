//! The client-side cache: reflector, informer and the list-then-watch source they read.
//! Follows client-go's `tools/cache`.

pub mod lister_watcher;
pub mod reflector;

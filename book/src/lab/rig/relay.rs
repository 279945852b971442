//! A TCP relay on 127.0.0.1 in front of a real API server: what a load balancer or a network
//! does to a watch, on demand. TLS passes through it untouched (the server's certificate
//! names 127.0.0.1, whatever the port), so a client reaches the same server through it, and
//! the relay can end every connection ([`Relay::cut`]) or stop listening for a while
//! ([`Relay::close`], [`Relay::reopen`]: the client's connections are refused, as when the
//! server is down): the two ways a watch on a real cluster ends without the server choosing
//! to.
//!
//! # Concurrency
//! One task accepts (aborted by `close`, which drops the listener); one task per connection
//! copies both ways until either side closes or the cut epoch moves (`tokio::sync::watch`).
//! The accept task's handle is behind a `parking_lot::Mutex`, never held across an await.

use std::{
    net::SocketAddr,
    path::{Path, PathBuf},
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
};

use parking_lot::Mutex;

use tokio::net::{TcpListener, TcpStream};

/// A running relay; dropping it stops accepting (open connections end with their peers).
pub struct Relay {
    addr: SocketAddr,
    upstream: SocketAddr,
    cuts: tokio::sync::watch::Sender<u64>,
    accepted: Arc<AtomicU64>,
    task: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl Relay {
    /// Starts a relay on a free 127.0.0.1 port to `upstream`.
    pub async fn start(upstream: SocketAddr) -> std::io::Result<Relay> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let (cuts, _) = tokio::sync::watch::channel(0u64);
        let relay = Relay {
            addr: listener.local_addr()?,
            upstream,
            cuts,
            accepted: Arc::new(AtomicU64::new(0)),
            task: Mutex::new(None),
        };
        relay.serve(listener);
        Ok(relay)
    }

    fn serve(&self, listener: TcpListener) {
        let (cuts, accepted, upstream) = (self.cuts.clone(), self.accepted.clone(), self.upstream);
        let task = tokio::spawn(async move {
            while let Ok((mut client, _)) = listener.accept().await {
                accepted.fetch_add(1, Ordering::SeqCst);
                let mut cut = cuts.subscribe();
                tokio::spawn(async move {
                    let Ok(mut server) = TcpStream::connect(upstream).await else {
                        return;
                    };
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut client, &mut server) => {}
                        _ = cut.changed() => {}
                    }
                });
            }
        });
        if let Some(old) = self.task.lock().replace(task) {
            old.abort();
        }
    }

    /// Where clients connect.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Ends every connection open now (a watch sees its stream end).
    pub fn cut(&self) {
        self.cuts.send_modify(|n| *n += 1);
    }

    /// Stops listening: a client's next connection is refused (ECONNREFUSED), as when the
    /// server is down. Open connections stay until [`Relay::cut`].
    pub fn close(&self) {
        if let Some(task) = self.task.lock().take() {
            task.abort(); // drops the listener
        }
    }

    /// Listens again on the same port.
    pub async fn reopen(&self) -> std::io::Result<()> {
        let listener = TcpListener::bind(self.addr).await?;
        self.serve(listener);
        Ok(())
    }

    /// Connections relayed so far.
    pub fn accepted(&self) -> u64 {
        self.accepted.load(Ordering::SeqCst)
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.close();
        self.cut();
    }
}

/// A copy of the kubeconfig at `path` whose clusters all point at `addr` (same scheme, same
/// CA), written as JSON (which is YAML) to `out`. Returns `out`.
pub fn kubeconfig_via(path: &Path, addr: SocketAddr, out: PathBuf) -> Result<PathBuf, String> {
    let mut kc = kube::config::Kubeconfig::read_from(path).map_err(|e| e.to_string())?;
    for named in &mut kc.clusters {
        if let Some(cluster) = named.cluster.as_mut() {
            let scheme = cluster
                .server
                .as_deref()
                .and_then(|s| s.split_once("://"))
                .map_or("https", |(scheme, _)| scheme)
                .to_owned();
            cluster.server = Some(format!("{scheme}://{addr}"));
        }
    }
    let text = serde_json::to_string_pretty(&kc).map_err(|e| e.to_string())?;
    if let Some(dir) = out.parent() {
        std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
    }
    std::fs::write(&out, text).map_err(|e| e.to_string())?;
    Ok(out)
}

/// The `host:port` of a kubeconfig's current cluster, as a socket address.
pub fn server_addr(path: &Path) -> Result<SocketAddr, String> {
    let kc = kube::config::Kubeconfig::read_from(path).map_err(|e| e.to_string())?;
    let context = kc
        .current_context
        .as_ref()
        .and_then(|c| kc.contexts.iter().find(|n| &n.name == c))
        .and_then(|n| n.context.as_ref())
        .map(|c| c.cluster.clone())
        .ok_or("no current context")?;
    let server = kc
        .clusters
        .iter()
        .find(|n| n.name == context)
        .and_then(|n| n.cluster.as_ref())
        .and_then(|c| c.server.clone())
        .ok_or("no server for the current context")?;
    let hostport = server
        .split_once("://")
        .map_or(server.as_str(), |(_, rest)| rest)
        .trim_end_matches('/');
    hostport
        .parse()
        .map_err(|e| format!("server {server}: {e}"))
}

//! The HTTP layer and the static backend alone, on a single-threaded runtime, for profiling and for
//! bench/serve-vs-nginx.sh when it is asked to measure the HTTP layer without `ordo serve`'s scheduler:
//! `cargo run --release -p ordo-serve --example static_bench -- ROOT [ADDR]` (ADDR defaults to 127.0.0.1:8081).

use std::sync::Arc;

use ordo_serve::backend::static_files::{StaticBackend, StaticConfig};
use ordo_serve::http::{Handler, Limits, Request, Response};
use ordo_serve::listen::run_listener;

struct Static(Arc<StaticBackend>);

impl Handler for Static {
    fn handle(&self, req: Request) -> impl std::future::Future<Output = Response> + Send + 'static {
        let backend = self.0.clone();
        async move { backend.call(&req).await }
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let root = args.next().ok_or("usage: static_bench ROOT [ADDR]")?;
    let addr = args.next().unwrap_or_else(|| "127.0.0.1:8081".to_string());
    let backend = StaticBackend::new(&StaticConfig::new(root), "")?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::bind(&addr).await?;
        eprintln!("static_bench listening on {}", listener.local_addr()?);
        let (tx, rx) = tokio::sync::watch::channel(false);
        tokio::spawn(async move {
            let _ = tokio::signal::ctrl_c().await;
            let _ = tx.send(true);
        });
        let limits = Limits {
            max_connections: 100_000,
            ..Limits::default()
        };
        run_listener(
            listener,
            Arc::new(Static(Arc::new(backend))),
            Arc::new(limits),
            rx,
        )
        .await
    })?;
    Ok(())
}

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use bosun_control::api::ApiOptions;
use bosun_control::server::{self, Config};
use bosun_control::store::StoreOptions;
use clap::Parser;
use tracing_subscriber::EnvFilter;

/// bosun's control plane: the Kubernetes API on an embedded store.
#[derive(Parser, Debug)]
#[command(name = "bosun-control", version)]
struct Args {
    /// Where the store, the admin token and the address file live.
    #[arg(long, env = "BOSUN_DATA_DIR", default_value = "/var/lib/bosun/control")]
    data_dir: PathBuf,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    bind: IpAddr,
    /// Port to listen on; 0 picks a free one (written to DATA_DIR/address).
    #[arg(long, default_value_t = 6443)]
    port: u16,
    /// How many past changes are kept for watches to resume from.
    #[arg(long, default_value_t = 20_000)]
    watch_history: u64,
    /// Seconds between bookmarks on idle watches that ask for them.
    #[arg(long, default_value_t = 30)]
    bookmark_interval: u64,
    /// Extra DNS names or IP addresses for the serving certificate.
    #[arg(long = "tls-san")]
    tls_sans: Vec<String>,
    /// Largest accepted request body, in bytes.
    #[arg(long, default_value_t = 3 * 1024 * 1024)]
    max_body_bytes: usize,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_env("BOSUN_LOG").unwrap_or_else(|_| EnvFilter::new("info")),
        )
        .init();
    let args = Args::parse();
    server::run(Config {
        data_dir: args.data_dir,
        bind: SocketAddr::new(args.bind, args.port),
        tls_sans: args.tls_sans,
        store: StoreOptions {
            history: args.watch_history,
        },
        api: ApiOptions {
            body_limit: args.max_body_bytes,
            bookmark_interval: Duration::from_secs(args.bookmark_interval.max(1)),
        },
    })
    .await
}

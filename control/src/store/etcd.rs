//! The etcd store (`bosun-control --store etcd://HOST:2379,...`): every
//! object in an etcd v3 cluster through the `etcd-client` crate, as
//! kube-apiserver keeps them.
//!
//! The revisions are etcd's: an object's `resourceVersion` is its key's
//! `mod_revision`; a create is a transaction on the key's
//! `create_revision` being 0, an update or delete one on its
//! `mod_revision` (a failed one reads the key back, for the actual
//! revision of the conflict); a list is one linearizable range (read in
//! pages, the later ones pinned to the first one's revision) whose
//! response header gives the revision it is consistent with; a watch is an
//! etcd watch from `after + 1` with previous values. etcd keeps the
//! history; [`compactor`] compacts it periodically, as kube-apiserver's
//! `--etcd-compaction-interval` does.
//!
//! Keys: bosun's `/registry/<resource>/...` live under `--etcd-prefix`
//! (default `/registry`, as kube-apiserver's), so that several clusters
//! can share one etcd.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use etcd_client::{
    Client, Compare, CompareOp, ConnectOptions, GetOptions, KvClient, Txn, TxnOp, TxnOpResponse,
    WatchClient,
};

use super::{KeyValue, Result, Revision, Store, StoreError, Stored};
pub(super) use retry::{reaching, reading};

mod cache;
#[cfg(test)]
mod cache_tests;
mod compactor;
#[cfg(test)]
mod leader_change_tests;
#[cfg(test)]
mod progress_race_tests;
mod retry;
mod version;
mod watch;

/// The root of bosun's own keys; under it, keys map onto `--etcd-prefix`.
const KEY_ROOT: &str = "/registry";

/// How many keys one range request of a list reads.
const LIST_PAGE: i64 = 500;

/// The largest gRPC message read from etcd (a page of a list of large
/// objects, a watch response of a large one; etcd's own request limit is
/// 1.5 MiB by default).
const MAX_MESSAGE: usize = 64 << 20;

/// How `bosun-control` reaches etcd.
#[derive(Debug, Clone)]
pub struct EtcdOptions {
    /// `host:port` of each member.
    pub endpoints: Vec<String>,
    /// TLS: the CA that signed the members' certificates, and the client's
    /// certificate and key (kube-apiserver's `--etcd-cafile`, `--etcd-certfile`,
    /// `--etcd-keyfile`). With a CA, the members are reached over https.
    pub ca_file: Option<PathBuf>,
    pub cert_file: Option<PathBuf>,
    pub key_file: Option<PathBuf>,
    /// Where bosun's keys live in etcd (`--etcd-prefix`), without a
    /// trailing slash.
    pub prefix: String,
    /// How often the history is compacted (0: never).
    pub compaction_interval: Duration,
    /// Whether lists and watches are served from a watch cache per
    /// resource (`--watch-cache`), or each from etcd.
    pub watch_cache: bool,
    /// How often a watched watch cache, or a watch of etcd itself, asks
    /// etcd how far it has got (a progress notification): the API's
    /// bookmark interval, so that each bookmark tells the latest.
    pub progress_interval: Duration,
}

impl EtcdOptions {
    /// The members of `etcd://HOST:PORT[,HOST:PORT...]`.
    pub fn parse_endpoints(url: &str) -> std::result::Result<Vec<String>, String> {
        let rest = url.strip_prefix("etcd://").ok_or_else(|| {
            format!("--store: {url:?} is not etcd://HOST:PORT[,HOST:PORT...] (or `embedded`)")
        })?;
        let endpoints: Vec<String> = rest
            .split(',')
            .map(|e| e.trim().trim_end_matches('/').to_string())
            .collect();
        for e in &endpoints {
            let valid = e.rsplit_once(':').is_some_and(|(host, port)| {
                !host.is_empty() && !host.contains('/') && port.parse::<u16>().is_ok()
            });
            if !valid {
                return Err(format!(
                    "--store: {e:?} in {url:?} is not HOST:PORT (etcd://HOST:PORT[,HOST:PORT...])"
                ));
            }
        }
        Ok(endpoints)
    }

    /// The `--etcd-prefix`, checked: a path starting with `/`.
    pub fn parse_prefix(prefix: &str) -> std::result::Result<String, String> {
        if !prefix.starts_with('/') || prefix.contains("//") {
            return Err(format!(
                "--etcd-prefix: {prefix:?} must be a path starting with / (e.g. /registry)"
            ));
        }
        Ok(prefix.trim_end_matches('/').to_string())
    }

    async fn connect_options(&self) -> std::result::Result<ConnectOptions, String> {
        let mut options = ConnectOptions::new()
            .with_connect_timeout(Duration::from_secs(5))
            .with_keep_alive(Duration::from_secs(30), Duration::from_secs(10))
            .with_keep_alive_while_idle(true);
        let read = |flag: &str, path: &PathBuf| {
            std::fs::read(path).map_err(|e| format!("{flag} {}: {e}", path.display()))
        };
        let mut tls = None;
        if let Some(ca) = &self.ca_file {
            let pem = read("--etcd-cafile", ca)?;
            tls = Some(
                etcd_client::TlsOptions::new()
                    .ca_certificate(etcd_client::Certificate::from_pem(pem)),
            );
        }
        match (&self.cert_file, &self.key_file) {
            (Some(cert), Some(key)) => {
                let identity = etcd_client::Identity::from_pem(
                    read("--etcd-certfile", cert)?,
                    read("--etcd-keyfile", key)?,
                );
                tls = Some(tls.unwrap_or_default().identity(identity));
            }
            (None, None) => {}
            (Some(_), None) => return Err("--etcd-certfile needs --etcd-keyfile".into()),
            (None, Some(_)) => return Err("--etcd-keyfile needs --etcd-certfile".into()),
        }
        if let Some(tls) = tls {
            options = options.with_tls(tls);
        }
        Ok(options)
    }
}

/// Shared by the store, its watches and its compactor.
pub(crate) struct Shared {
    kv: KvClient,
    watch: WatchClient,
    /// `--etcd-prefix`, without a trailing slash.
    prefix: String,
    /// The highest revision seen in any response or watch.
    revision: AtomicU64,
    /// [`EtcdOptions::progress_interval`].
    progress_interval: Duration,
    /// Whether etcd's requested progress notifications can be trusted to
    /// follow every event before them ([`version::requested_progress_in_order`]):
    /// only then does a consistent list come from the watch cache, and do
    /// watches ask for progress. Otherwise progress comes only from etcd's
    /// periodic notifications, which are in order on every version.
    requested_progress: AtomicBool,
}

impl Shared {
    /// Whether requested progress notifications are in order with events
    /// on these members (see [`version::requested_progress_in_order`]).
    pub(super) fn may_request_progress(&self) -> bool {
        self.requested_progress.load(Ordering::SeqCst)
    }

    fn seen(&self, header: Option<&etcd_client::ResponseHeader>) -> Revision {
        let rev = header.map_or(0, |h| h.revision().max(0) as u64);
        self.revision.fetch_max(rev, Ordering::SeqCst);
        rev
    }

    /// The etcd key of one of bosun's keys.
    fn key(&self, key: &str) -> Result<Vec<u8>> {
        match key
            .strip_prefix(KEY_ROOT)
            .filter(|rest| rest.starts_with('/'))
        {
            Some(rest) => Ok(format!("{}{rest}", self.prefix).into_bytes()),
            None => Err(StoreError::Backend(format!(
                "key {key:?} is not under {KEY_ROOT}/"
            ))),
        }
    }

    /// The etcd key prefix for one of bosun's prefixes; one that all of
    /// bosun's keys start with (`""`, `/reg`) is all of them.
    fn prefix_key(&self, prefix: &str) -> Result<Vec<u8>> {
        if format!("{KEY_ROOT}/").starts_with(prefix) {
            return Ok(format!("{}/", self.prefix).into_bytes());
        }
        self.key(prefix)
    }

    /// bosun's key for an etcd key under the prefix.
    fn bosun_key(&self, key: &[u8]) -> Result<String> {
        std::str::from_utf8(key)
            .ok()
            .and_then(|k| k.strip_prefix(self.prefix.as_str()))
            .filter(|rest| rest.starts_with('/'))
            .map(|rest| format!("{KEY_ROOT}{rest}"))
            .ok_or_else(|| {
                StoreError::Backend(format!(
                    "etcd key {:?} is not under {}/",
                    String::from_utf8_lossy(key),
                    self.prefix
                ))
            })
    }

    fn key_value(&self, kv: &etcd_client::KeyValue) -> Result<KeyValue> {
        Ok(KeyValue {
            key: self.bosun_key(kv.key())?,
            value: Stored::new(kv.value()),
            mod_revision: kv.mod_revision() as u64,
        })
    }

    /// The revision of the latest write, from etcd (a count-only read).
    async fn fetch_revision(&self) -> Result<Revision> {
        let key = format!("{}/", self.prefix);
        let resp = reading(|| {
            let (mut kv, key) = (self.kv.clone(), key.clone());
            async move {
                kv.get(key, Some(GetOptions::new().with_prefix().with_count_only()))
                    .await
            }
        })
        .await
        .map_err(etcd_error)?;
        Ok(self.seen(resp.header()))
    }
}

/// The end of the range of keys starting with `prefix` (etcd's
/// `GetPrefixRangeEnd`).
fn range_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    vec![0]
}

/// An etcd failure as the store's: compaction is told apart by etcd's
/// message (its `ErrCompacted`), everything else is a backend error.
fn etcd_error(e: etcd_client::Error) -> StoreError {
    StoreError::Backend(format!("etcd: {e}"))
}

/// Whether `e` is etcd's "required revision has been compacted".
fn is_compacted(e: &etcd_client::Error) -> bool {
    e.to_string()
        .contains("required revision has been compacted")
}

pub struct EtcdStore {
    shared: Arc<Shared>,
    caches: cache::Caches,
    compactor: Option<tokio::task::JoinHandle<()>>,
}

impl Drop for EtcdStore {
    fn drop(&mut self) {
        if let Some(task) = self.compactor.take() {
            task.abort();
        }
    }
}

impl EtcdStore {
    /// Connects to the members and reads the current revision, trying for
    /// up to `wait` while etcd is not reachable yet (members starting with
    /// the control plane).
    pub async fn connect(options: &EtcdOptions, wait: Duration) -> Result<Self> {
        let connect = options
            .connect_options()
            .await
            .map_err(StoreError::Backend)?;
        let client = Client::connect(&options.endpoints, Some(connect.clone()))
            .await
            .map_err(|e| StoreError::Backend(format!("connecting to etcd: {e}")))?;
        let shared = Arc::new(Shared {
            kv: client.kv_client().max_decoding_message_size(MAX_MESSAGE),
            watch: client.watch_client().max_decoding_message_size(MAX_MESSAGE),
            prefix: options.prefix.clone(),
            revision: AtomicU64::new(0),
            progress_interval: options.progress_interval.max(Duration::from_millis(10)),
            requested_progress: AtomicBool::new(false),
        });
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            match shared.fetch_revision().await {
                Ok(_) => break,
                Err(e) if tokio::time::Instant::now() >= deadline => {
                    return Err(StoreError::Backend(format!(
                        "reaching etcd at {}: {e}",
                        options.endpoints.join(",")
                    )))
                }
                Err(e) => {
                    tracing::info!(error = %e, "waiting for etcd");
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
            }
        }
        let versions = version::member_versions(&options.endpoints, &connect).await;
        let in_order = !versions.is_empty()
            && versions
                .iter()
                .all(|(_, v)| version::requested_progress_in_order(v));
        shared.requested_progress.store(in_order, Ordering::SeqCst);
        if !in_order {
            tracing::warn!(
                ?versions,
                "etcd before 3.4.31/3.5.13 may send a requested progress notification ahead of \
                 events (etcd issue 15220): consistent lists are read from etcd, not the watch \
                 cache, and watches follow etcd's periodic progress notifications only"
            );
        }
        let compactor = (!options.compaction_interval.is_zero())
            .then(|| tokio::spawn(compactor::run(shared.clone(), options.compaction_interval)));
        Ok(EtcdStore {
            caches: cache::Caches::new(shared.clone(), options.watch_cache),
            shared,
            compactor,
        })
    }

    /// Starts the watch caches of the resources under `prefixes` (each a
    /// `/registry/<resource>/`), as kube-apiserver starts a cacher for
    /// every resource it serves: the caches' windows begin now, and a
    /// watch from before one is a 410 (see [`cache`]).
    pub fn start_caches(&self, prefixes: impl IntoIterator<Item = String>) {
        self.caches.start(prefixes);
    }

    /// Compacts etcd's history up to `revision`: watches from before it
    /// fail with [`StoreError::Compacted`] from then on.
    pub async fn compact(&self, revision: Revision) -> Result<()> {
        compactor::compact(&self.shared, revision).await
    }

    async fn txn(&self, txn: Txn) -> Result<etcd_client::TxnResponse> {
        reaching(|| {
            let (mut kv, txn) = (self.shared.kv.clone(), txn.clone());
            async move { kv.txn(txn).await }
        })
        .await
        .map_err(etcd_error)
    }

    /// A compare-and-swap on `key`'s mod revision: `op` if it is at
    /// `expected`, else the key read back for the error.
    async fn swap(&self, key: &str, expected: Revision, op: TxnOp) -> Result<Revision> {
        let etcd_key = self.shared.key(key)?;
        let txn = Txn::new()
            .when([
                Compare::version(etcd_key.clone(), CompareOp::Greater, 0),
                Compare::mod_revision(etcd_key.clone(), CompareOp::Equal, expected as i64),
            ])
            .and_then([op])
            .or_else([TxnOp::get(etcd_key, None)]);
        let resp = self.txn(txn).await?;
        let rev = self.shared.seen(resp.header());
        if resp.succeeded() {
            return Ok(rev);
        }
        let actual = resp.op_responses().into_iter().find_map(|r| match r {
            TxnOpResponse::Get(get) => get.kvs().first().map(|kv| kv.mod_revision() as u64),
            _ => None,
        });
        match actual {
            None => Err(StoreError::NotFound(key.to_string())),
            Some(actual) => Err(StoreError::Conflict {
                key: key.to_string(),
                expected,
                actual,
            }),
        }
    }
}

/// One list, read in pages pinned to the first one's revision: of the
/// keys under `prefix` from `start` on (a bosun key, inclusive), at
/// `revision` (None: a linearizable read of the latest).
pub(super) async fn list_range(
    shared: &Shared,
    prefix: &str,
    start: Option<&str>,
    revision: Option<Revision>,
) -> std::result::Result<(Vec<KeyValue>, Revision), etcd_client::Error> {
    let invalid = |e: StoreError| etcd_client::Error::InvalidArgs(e.to_string());
    let first = shared.prefix_key(prefix).map_err(invalid)?;
    let end = range_end(&first);
    let mut from = match start {
        Some(start) => shared.key(start).map_err(invalid)?.max(first),
        None => first,
    };
    let kv = shared.kv.clone();
    let mut items = Vec::new();
    let mut revision = revision.unwrap_or(0);
    loop {
        let mut options = GetOptions::new()
            .with_range(end.clone())
            .with_limit(LIST_PAGE);
        if revision != 0 {
            options = options.with_revision(revision as i64);
        }
        let resp = reading(|| {
            let (mut kv, from, options) = (kv.clone(), from.clone(), options.clone());
            async move { kv.get(from, Some(options)).await }
        })
        .await?;
        let seen = shared.seen(resp.header());
        if revision == 0 {
            revision = seen;
        }
        for item in resp.kvs() {
            items.push(shared.key_value(item).map_err(invalid)?);
        }
        match resp.kvs().last() {
            Some(last) if resp.more() => {
                from = last.key().to_vec();
                from.push(0);
            }
            _ => return Ok((items, revision)),
        }
    }
}

/// A list error as the store's.
fn list_error(e: etcd_client::Error, requested: Revision) -> StoreError {
    match e {
        e if is_compacted(&e) => StoreError::Compacted {
            requested,
            oldest: 0,
        },
        etcd_client::Error::InvalidArgs(e) => StoreError::Backend(e),
        e => etcd_error(e),
    }
}

impl EtcdStore {
    /// Whether these members' requested progress notifications are in
    /// order with events, so that consistent lists come from the watch
    /// cache (else from etcd).
    pub fn requested_progress_in_order(&self) -> bool {
        self.shared.may_request_progress()
    }

    /// A list read from etcd, not the watch cache.
    pub async fn list_uncached(&self, prefix: &str) -> Result<(Vec<KeyValue>, Revision)> {
        // A later page whose revision was compacted meanwhile: read again
        // from the start, at the current revision.
        for _ in 0..3 {
            match list_range(&self.shared, prefix, None, None).await {
                Ok(listed) => return Ok(listed),
                Err(e) if is_compacted(&e) => continue,
                Err(e) => return Err(list_error(e, 0)),
            }
        }
        Err(StoreError::Backend(format!(
            "listing {prefix}: compacted three times while reading"
        )))
    }

    /// A watch of etcd itself, not of the watch cache.
    pub async fn watch_uncached(
        &self,
        prefix: &str,
        after: Revision,
    ) -> Result<super::ProgressWatch> {
        watch::watch(self.shared.clone(), prefix, after).await
    }
}

#[async_trait::async_trait]
impl Store for EtcdStore {
    async fn get(&self, key: &str) -> Result<Option<KeyValue>> {
        let etcd_key = self.shared.key(key)?;
        let resp = reading(|| {
            let (mut kv, etcd_key) = (self.shared.kv.clone(), etcd_key.clone());
            async move { kv.get(etcd_key, None).await }
        })
        .await
        .map_err(etcd_error)?;
        self.shared.seen(resp.header());
        resp.kvs()
            .first()
            .map(|kv| self.shared.key_value(kv))
            .transpose()
    }

    async fn list(&self, prefix: &str) -> Result<(Vec<KeyValue>, Revision)> {
        if let Some(cache) = self.caches.of(prefix).await {
            if let Some(listed) = cache.list(&self.shared, prefix).await? {
                return Ok(listed);
            }
        }
        self.list_uncached(prefix).await
    }

    async fn list_stale(&self, prefix: &str) -> Result<(Vec<KeyValue>, Revision)> {
        if let Some(cache) = self.caches.of(prefix).await {
            if let Some(listed) = cache.snapshot(prefix) {
                return Ok(listed);
            }
        }
        self.list_uncached(prefix).await
    }

    async fn list_from(
        &self,
        prefix: &str,
        start: &str,
        revision: Option<Revision>,
    ) -> Result<(Vec<KeyValue>, Revision)> {
        list_range(&self.shared, prefix, Some(start), revision)
            .await
            .map_err(|e| list_error(e, revision.unwrap_or(0)))
    }

    async fn create(&self, key: &str, value: Vec<u8>) -> Result<Revision> {
        let etcd_key = self.shared.key(key)?;
        let txn = Txn::new()
            .when([Compare::create_revision(
                etcd_key.clone(),
                CompareOp::Equal,
                0,
            )])
            .and_then([TxnOp::put(etcd_key, value, None)]);
        let resp = self.txn(txn).await?;
        let rev = self.shared.seen(resp.header());
        if resp.succeeded() {
            Ok(rev)
        } else {
            Err(StoreError::AlreadyExists(key.to_string()))
        }
    }

    async fn update(&self, key: &str, expected: Revision, value: Vec<u8>) -> Result<Revision> {
        let op = TxnOp::put(self.shared.key(key)?, value, None);
        self.swap(key, expected, op).await
    }

    async fn delete(&self, key: &str, expected: Revision) -> Result<Revision> {
        let op = TxnOp::delete(self.shared.key(key)?, None);
        self.swap(key, expected, op).await
    }

    async fn watch(&self, prefix: &str, after: Revision) -> Result<super::EventStream> {
        Ok(self.watch_with_progress(prefix, after).await?.events)
    }

    async fn watch_with_progress(
        &self,
        prefix: &str,
        after: Revision,
    ) -> Result<super::ProgressWatch> {
        if let Some(cache) = self.caches.of(prefix).await {
            if let Some(watch) = cache.watch(prefix, after)? {
                return Ok(watch);
            }
        }
        self.watch_uncached(prefix, after).await
    }

    fn current_revision(&self) -> Revision {
        self.shared.revision.load(Ordering::SeqCst)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_and_prefix_are_checked() {
        assert_eq!(
            EtcdOptions::parse_endpoints("etcd://127.0.0.1:2379,e2:2379").unwrap(),
            ["127.0.0.1:2379", "e2:2379"]
        );
        for bad in [
            "http://a:2379",
            "etcd://",
            "etcd://a",
            "etcd://a:x",
            "etcd://a:1,",
        ] {
            let err = EtcdOptions::parse_endpoints(bad).unwrap_err();
            assert!(err.starts_with("--store"), "{bad}: {err}");
        }
        assert_eq!(
            EtcdOptions::parse_prefix("/registry/").unwrap(),
            "/registry"
        );
        assert_eq!(EtcdOptions::parse_prefix("/c1").unwrap(), "/c1");
        assert!(EtcdOptions::parse_prefix("registry")
            .unwrap_err()
            .starts_with("--etcd-prefix"));
    }

    #[test]
    fn range_end_is_etcds() {
        assert_eq!(range_end(b"/a/"), b"/a0");
        assert_eq!(range_end(b"a\xff"), b"b");
        assert_eq!(range_end(b"\xff"), b"\0");
    }
}

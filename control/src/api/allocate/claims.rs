//! Cluster IPs and node ports held in the store, one key per address or
//! port, each created only if absent, so that several API servers
//! allocating at once never hand the same one to two Services (the store's
//! create is a compare-and-swap on the key not existing; on etcd, a
//! transaction comparing its create revision with 0). Upstream keeps one
//! bitmap per range under `/registry/ranges/...` written with
//! compare-and-swap, or (with the MultiCIDRServiceAllocator) one IPAddress
//! object per address; a key per item is the latter's shape with the
//! former's place:
//!
//! - `/registry/ranges/serviceips/<ip>` and
//!   `/registry/ranges/servicenodeports/<port>`, each naming the Service
//!   (namespace, name, uid) that holds it;
//! - claimed on create after the choice from the listed Services (a
//!   random address someone else claimed first is chosen again; a
//!   requested one is "already allocated"), released when the create does
//!   not go through (invalid, refused, dry run) and when the Service is
//!   deleted;
//! - [`repair`], run by every API server as upstream's repair controllers
//!   (`pkg/registry/core/service/ipallocator/controller/repair.go` and the
//!   port allocator's): Services whose items have no claim (made before
//!   claims existed, or by an update) get them, and claims no Service
//!   holds are released once seen leaked on three runs in a row (a claim
//!   whose Service is still being created is not leaked for long).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};

use crate::store::{Store, StoreError};

/// Where the cluster IPs' claims are kept.
pub const IP_PREFIX: &str = "/registry/ranges/serviceips/";
/// Where the node ports' claims are kept.
pub const PORT_PREFIX: &str = "/registry/ranges/servicenodeports/";
/// How many runs in a row a claim must be seen leaked before it goes.
const LEAK_RUNS: u32 = 3;

/// The claim keys of what `svc` holds: its cluster IP(s) and node ports.
pub fn keys_of(svc: &Value) -> Vec<String> {
    let mut keys = Vec::new();
    let ips = svc
        .pointer("/spec/clusterIPs")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_else(|| {
            svc.pointer("/spec/clusterIP")
                .cloned()
                .into_iter()
                .collect()
        });
    for ip in ips.iter().filter_map(Value::as_str) {
        if !ip.is_empty() && ip != "None" {
            keys.push(format!("{IP_PREFIX}{ip}"));
        }
    }
    for port in svc
        .pointer("/spec/ports")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if let Some(n) = port["nodePort"].as_i64() {
            keys.push(format!("{PORT_PREFIX}{n}"));
        }
    }
    keys.dedup();
    keys
}

fn uid_of(v: &Value) -> &str {
    v.pointer("/metadata/uid")
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// What a claim says: the Service that holds the item.
fn claim_value(svc: &Value) -> Vec<u8> {
    let md = &svc["metadata"];
    serde_json::to_vec(&json!({
        "namespace": md["namespace"],
        "name": md["name"],
        "uid": md["uid"],
    }))
    .expect("JSON")
}

fn claim_uid(bytes: &[u8]) -> String {
    serde_json::from_slice::<Value>(bytes)
        .ok()
        .and_then(|v| v["uid"].as_str().map(str::to_string))
        .unwrap_or_default()
}

/// Claims every key of `svc`. Returns the keys someone else holds (then
/// nothing is claimed: what this call claimed is released again).
pub async fn claim_all(store: &dyn Store, svc: &Value) -> Result<Vec<String>, StoreError> {
    let uid = uid_of(svc);
    let mut claimed = Vec::new();
    let mut taken = Vec::new();
    for key in keys_of(svc) {
        match store.create(&key, claim_value(svc)).await {
            Ok(_) => claimed.push(key),
            Err(StoreError::AlreadyExists(_)) => {
                let ours = store
                    .get(&key)
                    .await?
                    .is_some_and(|kv| !uid.is_empty() && claim_uid(&kv.value) == uid);
                if !ours {
                    taken.push(key);
                }
            }
            Err(e) => {
                release_keys(store, &claimed, uid).await;
                return Err(e);
            }
        }
    }
    if !taken.is_empty() {
        release_keys(store, &claimed, uid).await;
    }
    Ok(taken)
}

/// Releases the claims `svc` holds (those still naming its uid).
pub async fn release(store: &dyn Store, svc: &Value) {
    release_keys(store, &keys_of(svc), uid_of(svc)).await;
}

async fn release_keys(store: &dyn Store, keys: &[String], uid: &str) {
    for key in keys {
        match store.get(key).await {
            Ok(Some(kv)) if claim_uid(&kv.value) == uid => {
                if let Err(e) = store.delete(key, kv.mod_revision).await {
                    tracing::debug!(%key, error = %e, "releasing an allocation (repair will)");
                }
            }
            Ok(_) => {}
            Err(e) => tracing::debug!(%key, error = %e, "releasing an allocation (repair will)"),
        }
    }
}

/// Releases what a create claimed unless it is disarmed (the create went
/// through): dropped on any error path, it releases in the background.
pub struct Unclaim {
    armed: Option<(Arc<dyn Store>, Value)>,
}

impl Unclaim {
    /// For a Service about to be created with the items in `svc`; a no-op
    /// guard for anything else.
    pub fn new(store: &Arc<dyn Store>, is_service: bool, svc: &Value) -> Unclaim {
        Unclaim {
            armed: is_service.then(|| (store.clone(), svc.clone())),
        }
    }

    /// The Service is stored: its claims stay.
    pub fn disarm(mut self) {
        self.armed = None;
    }
}

impl Drop for Unclaim {
    fn drop(&mut self) {
        if let Some((store, svc)) = self.armed.take() {
            if let Ok(handle) = tokio::runtime::Handle::try_current() {
                handle.spawn(async move { release(store.as_ref(), &svc).await });
            }
        }
    }
}

/// The repair loop: every `interval`, claims what Services hold without a
/// claim and releases claims no Service has held for [`LEAK_RUNS`] runs.
pub async fn repair(store: Arc<dyn Store>, interval: Duration) {
    let mut leaked: HashMap<String, u32> = HashMap::new();
    loop {
        if let Err(e) = repair_once(store.as_ref(), &mut leaked).await {
            tracing::warn!(error = %e, "repairing the service IP and node port allocations");
        }
        tokio::time::sleep(interval).await;
    }
}

/// One run of [`repair`].
pub async fn repair_once(
    store: &dyn Store,
    leaked: &mut HashMap<String, u32>,
) -> Result<(), StoreError> {
    let services = bosun::resources::by_name("services").expect("served");
    // Claims first: a claim made after this list but before the Services'
    // is then seen with its Service.
    let (ips, _) = store.list(IP_PREFIX).await?;
    let (ports, _) = store.list(PORT_PREFIX).await?;
    let (stored, _) = store.list(&services.storage_prefix()).await?;
    let mut held: HashMap<String, Value> = HashMap::new();
    for kv in &stored {
        let Ok(svc) = serde_json::from_slice::<Value>(&kv.value) else {
            continue;
        };
        for key in keys_of(&svc) {
            held.insert(key, svc.clone());
        }
    }
    let mut claims: HashMap<&str, _> = HashMap::new();
    for kv in ips.iter().chain(ports.iter()) {
        claims.insert(kv.key.as_str(), kv);
    }
    for (key, svc) in &held {
        match claims.get(key.as_str()) {
            None => match store.create(key, claim_value(svc)).await {
                Ok(_) | Err(StoreError::AlreadyExists(_)) => {}
                Err(e) => return Err(e),
            },
            Some(kv) if claim_uid(&kv.value) != uid_of(svc) => {
                // The claim names another (say, a deleted Service's that a
                // later Service took over the item from while claims were
                // not kept): the live Service's it is.
                let holder_live = stored.iter().any(|s| {
                    serde_json::from_slice::<Value>(&s.value)
                        .is_ok_and(|v| uid_of(&v) == claim_uid(&kv.value))
                });
                if holder_live {
                    tracing::warn!(%key, "allocated to more than one Service");
                } else {
                    let _ = store.update(key, kv.mod_revision, claim_value(svc)).await;
                }
            }
            Some(_) => {}
        }
    }
    let mut still = HashMap::new();
    for (key, kv) in claims {
        if held.contains_key(key) {
            continue;
        }
        let runs = leaked.get(key).copied().unwrap_or(0) + 1;
        if runs >= LEAK_RUNS {
            match store.delete(key, kv.mod_revision).await {
                Ok(_) => tracing::info!(%key, "released a leaked allocation"),
                Err(e) => tracing::debug!(%key, error = %e, "releasing a leaked allocation"),
            }
        } else {
            still.insert(key.to_string(), runs);
        }
    }
    *leaked = still;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{EmbeddedStore, StoreOptions};

    fn svc(name: &str, uid: &str, ip: &str, node_port: Option<i64>) -> Value {
        let mut ports = json!([{"port": 80}]);
        if let Some(p) = node_port {
            ports[0]["nodePort"] = json!(p);
        }
        json!({"metadata": {"namespace": "default", "name": name, "uid": uid},
               "spec": {"clusterIP": ip, "clusterIPs": [ip], "ports": ports}})
    }

    fn store() -> Arc<dyn Store> {
        Arc::new(EmbeddedStore::in_memory(StoreOptions::default()).unwrap())
    }

    #[tokio::test]
    async fn of_two_concurrent_claims_of_one_address_one_wins_and_the_other_keeps_nothing() {
        let store = store();
        let a = svc("a", "uid-a", "10.96.0.7", Some(30001));
        let b = svc("b", "uid-b", "10.96.0.7", Some(30002));
        let (ta, tb) = tokio::join!(claim_all(store.as_ref(), &a), claim_all(store.as_ref(), &b));
        let (ta, tb) = (ta.unwrap(), tb.unwrap());
        assert!(
            ta.is_empty() != tb.is_empty(),
            "exactly one wins: {ta:?} {tb:?}"
        );
        let loser_port = if ta.is_empty() { 30002 } else { 30001 };
        let (ports, _) = store.list(PORT_PREFIX).await.unwrap();
        let ports: Vec<&str> = ports.iter().map(|kv| kv.key.as_str()).collect();
        assert!(
            !ports.contains(&format!("{PORT_PREFIX}{loser_port}").as_str()),
            "the loser's node port stayed claimed: {ports:?}"
        );
        // Claiming again what one holds already is fine.
        let winner = if ta.is_empty() { &a } else { &b };
        assert!(claim_all(store.as_ref(), winner).await.unwrap().is_empty());
        release(store.as_ref(), winner).await;
        assert!(store.list(IP_PREFIX).await.unwrap().0.is_empty());
    }

    #[tokio::test]
    async fn repair_claims_for_services_without_and_frees_leaks_after_three_runs() {
        let store = store();
        let services = bosun::resources::by_name("services").unwrap();
        let held = svc("held", "uid-h", "10.96.0.8", Some(30010));
        store
            .create(
                &services.storage_key(Some("default"), "held"),
                serde_json::to_vec(&held).unwrap(),
            )
            .await
            .unwrap();
        let gone = svc("gone", "uid-g", "10.96.0.9", None);
        assert!(claim_all(store.as_ref(), &gone).await.unwrap().is_empty());
        let mut leaked = HashMap::new();
        let keys = |store: Arc<dyn Store>| async move {
            let mut keys: Vec<String> = store
                .list("/registry/ranges/")
                .await
                .unwrap()
                .0
                .into_iter()
                .map(|kv| kv.key)
                .collect();
            keys.sort();
            keys
        };
        repair_once(store.as_ref(), &mut leaked).await.unwrap();
        assert_eq!(
            keys(store.clone()).await,
            [
                format!("{IP_PREFIX}10.96.0.8"),
                format!("{IP_PREFIX}10.96.0.9"),
                format!("{PORT_PREFIX}30010")
            ]
        );
        repair_once(store.as_ref(), &mut leaked).await.unwrap();
        assert!(keys(store.clone())
            .await
            .contains(&format!("{IP_PREFIX}10.96.0.9")));
        repair_once(store.as_ref(), &mut leaked).await.unwrap();
        assert_eq!(
            keys(store.clone()).await,
            [
                format!("{IP_PREFIX}10.96.0.8"),
                format!("{PORT_PREFIX}30010")
            ]
        );
    }

    #[tokio::test]
    async fn a_create_that_fails_or_is_a_dry_run_and_a_delete_release_the_claims() {
        use k8s_openapi::api::core::v1::Service;
        use kube::api::{DeleteParams, PostParams};
        let api = crate::toolkit::testing::TestApi::start().await;
        let claimed = |store: Arc<dyn Store>| async move {
            store.list("/registry/ranges/").await.unwrap().0.len()
        };
        let body = |ns: &str| -> Service {
            serde_json::from_value(json!({"metadata": {"name": "web", "namespace": ns},
                "spec": {"type": "NodePort", "ports": [{"port": 80}]}}))
            .unwrap()
        };
        let missing = api.api::<Service>(Some("no-such-namespace"));
        missing
            .create(&PostParams::default(), &body("no-such-namespace"))
            .await
            .unwrap_err();
        let dry = PostParams {
            dry_run: true,
            ..Default::default()
        };
        let services = api.api::<Service>(Some("default"));
        services.create(&dry, &body("default")).await.unwrap();
        crate::toolkit::testing::eventually(
            "the failed and the dry-run creates' claims released",
            Duration::from_secs(10),
            || async { (claimed(api.store.clone()).await == 0).then_some(()) },
        )
        .await;
        services
            .create(&PostParams::default(), &body("default"))
            .await
            .unwrap();
        assert_eq!(
            claimed(api.store.clone()).await,
            2,
            "cluster IP and node port"
        );
        services
            .delete("web", &DeleteParams::default())
            .await
            .unwrap();
        assert_eq!(claimed(api.store.clone()).await, 0);
    }
}

//! The webhooks of every Validating- and MutatingWebhookConfiguration,
//! parsed once and kept current from the store's watch (as upstream's
//! webhook plugins read configurations from an informer): every write in
//! the cluster consults them, so none lists the store. With no
//! configuration the check is one lock read and an empty slice.

use std::sync::{Arc, RwLock};
use std::time::Duration;

use bosun::selector::LabelSelector;
use k8s_openapi::api::admissionregistration::v1 as ar;

use crate::store::Store;

pub use crate::api::webhook_client::Endpoint;

/// One webhook of one configuration, as the dispatcher uses it.
#[derive(Clone)]
pub struct Hook {
    /// The configuration's name (configurations run sorted by it).
    pub config: String,
    pub name: String,
    pub rules: Vec<ar::RuleWithOperations>,
    /// `failurePolicy: Ignore`: a failed call lets the request through.
    pub ignore_failures: bool,
    /// `matchPolicy: Exact`: only the request's own version matches.
    pub exact: bool,
    pub namespace_selector: LabelSelector,
    pub object_selector: LabelSelector,
    /// `sideEffects` is None or NoneOnDryRun: may be called on a dry run.
    pub dry_run_safe: bool,
    pub timeout: Duration,
    /// `reinvocationPolicy: IfNeeded` (mutating only).
    pub reinvoke: bool,
    /// `matchConditions`, each compiled once: its name and CEL program
    /// (or why it did not compile, reported on each matching request).
    pub match_conditions: Vec<(String, Result<bosun::crd_schema::cel::Program, String>)>,
    pub endpoint: Endpoint,
    /// TLS trusting `caBundle` (or the system's roots when none is given);
    /// `Err` keeps why it could not be built, reported on each call.
    pub tls: Result<Arc<rustls::ClientConfig>, String>,
}

/// The webhooks of all configurations, in calling order.
#[derive(Default)]
pub struct Snapshot {
    pub mutating: Vec<Arc<Hook>>,
    pub validating: Vec<Arc<Hook>>,
}

/// The configurations' webhooks and the store they follow.
pub struct Webhooks {
    store: Arc<dyn Store>,
    snapshot: RwLock<Arc<Snapshot>>,
}

const PLURALS: [&str; 2] = [
    "mutatingwebhookconfigurations",
    "validatingwebhookconfigurations",
];

fn prefix(plural: &str) -> String {
    bosun::resources::by_path("admissionregistration.k8s.io", "v1", plural)
        .expect("webhook configurations are served")
        .storage_prefix()
}

impl Webhooks {
    /// The webhooks the store holds now; [`Webhooks::follow`] keeps them
    /// current.
    pub async fn new(store: Arc<dyn Store>) -> Result<Arc<Webhooks>, String> {
        let w = Arc::new(Webhooks {
            store,
            snapshot: RwLock::new(Arc::default()),
        });
        w.reload().await.map_err(|e| e.to_string())?;
        Ok(w)
    }

    pub fn snapshot(&self) -> Arc<Snapshot> {
        self.snapshot.read().expect("webhooks lock").clone()
    }

    async fn reload(&self) -> Result<u64, crate::store::StoreError> {
        let mut snap = Snapshot::default();
        let mut at = 0;
        for plural in PLURALS {
            let (kvs, rev) = self
                .store
                .list(&prefix(plural))
                .await
                .map_err(|e| crate::store::reading(plural, e))?;
            at = at.max(rev);
            // Keys end in the name: the listing is in name order, the
            // order upstream calls configurations in.
            for kv in kvs {
                let bytes: &[u8] = &kv.value;
                if plural.starts_with("mutating") {
                    match serde_json::from_slice::<ar::MutatingWebhookConfiguration>(bytes) {
                        Ok(c) => snap.mutating.extend(mutating_hooks(&c)),
                        Err(e) => tracing::warn!(key = %kv.key, error = %e, "webhooks: unreadable"),
                    }
                } else {
                    match serde_json::from_slice::<ar::ValidatingWebhookConfiguration>(bytes) {
                        Ok(c) => snap.validating.extend(validating_hooks(&c)),
                        Err(e) => tracing::warn!(key = %kv.key, error = %e, "webhooks: unreadable"),
                    }
                }
            }
        }
        *self.snapshot.write().expect("webhooks lock") = Arc::new(snap);
        Ok(at)
    }

    /// Follows the store's changes to both kinds until the store closes:
    /// any change reloads them all (configurations change rarely).
    pub async fn follow(self: Arc<Self>) {
        let prefixes: Vec<String> = PLURALS.iter().map(|p| prefix(p)).collect();
        crate::store::reload_on_change(self.store.as_ref(), &prefixes, "webhooks", || self.reload())
            .await
    }
}

/// The fields both webhook kinds share.
struct Common<'a> {
    config: &'a str,
    name: &'a str,
    rules: Option<&'a Vec<ar::RuleWithOperations>>,
    failure_policy: Option<&'a str>,
    match_policy: Option<&'a str>,
    namespace_selector: Option<&'a k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector>,
    object_selector: Option<&'a k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector>,
    side_effects: &'a str,
    timeout_seconds: Option<i32>,
    reinvoke: bool,
    match_conditions: Option<&'a Vec<ar::MatchCondition>>,
    client: &'a ar::WebhookClientConfig,
}

fn hook(c: Common<'_>) -> Arc<Hook> {
    // A nil selector is `{}` after defaulting: it matches everything.
    let selector = |s: Option<&_>| match s {
        Some(s) => {
            LabelSelector::from_label_selector(s).unwrap_or_else(|_| LabelSelector::nothing())
        }
        None => LabelSelector::everything(),
    };
    let endpoint = match (&c.client.url, &c.client.service) {
        (Some(u), _) => url::Url::parse(u)
            .map(Endpoint::Url)
            .unwrap_or_else(|_| Endpoint::Url(url::Url::parse("https://invalid.").expect("url"))),
        (None, Some(s)) => Endpoint::Service {
            namespace: s.namespace.clone(),
            name: s.name.clone(),
            port: s.port.and_then(|p| u16::try_from(p).ok()).unwrap_or(443),
            path: s.path.clone().unwrap_or_default(),
        },
        (None, None) => Endpoint::Url(url::Url::parse("https://invalid.").expect("url")),
    };
    Arc::new(Hook {
        config: c.config.to_string(),
        name: c.name.to_string(),
        rules: c.rules.cloned().unwrap_or_default(),
        ignore_failures: c.failure_policy == Some("Ignore"),
        exact: c.match_policy == Some("Exact"),
        namespace_selector: selector(c.namespace_selector),
        object_selector: selector(c.object_selector),
        dry_run_safe: matches!(c.side_effects, "None" | "NoneOnDryRun"),
        timeout: Duration::from_secs(c.timeout_seconds.unwrap_or(10).clamp(1, 30) as u64),
        reinvoke: c.reinvoke,
        match_conditions: c
            .match_conditions
            .into_iter()
            .flatten()
            .map(|m| {
                let program = bosun::crd_schema::cel::compile_with(
                    &m.expression,
                    &["object", "oldObject", "request"],
                );
                (m.name.clone(), program)
            })
            .collect(),
        endpoint,
        tls: crate::api::webhook_client::tls_config(
            c.client.ca_bundle.as_ref().map(|b| b.0.as_slice()),
        )
        .map(Arc::new),
    })
}

fn mutating_hooks(c: &ar::MutatingWebhookConfiguration) -> Vec<Arc<Hook>> {
    let config = c.metadata.name.as_deref().unwrap_or_default();
    c.webhooks
        .iter()
        .flatten()
        .map(|w| {
            hook(Common {
                config,
                name: &w.name,
                rules: w.rules.as_ref(),
                failure_policy: w.failure_policy.as_deref(),
                match_policy: w.match_policy.as_deref(),
                namespace_selector: w.namespace_selector.as_ref(),
                object_selector: w.object_selector.as_ref(),
                side_effects: &w.side_effects,
                timeout_seconds: w.timeout_seconds,
                reinvoke: w.reinvocation_policy.as_deref() == Some("IfNeeded"),
                match_conditions: w.match_conditions.as_ref(),
                client: &w.client_config,
            })
        })
        .collect()
}

fn validating_hooks(c: &ar::ValidatingWebhookConfiguration) -> Vec<Arc<Hook>> {
    let config = c.metadata.name.as_deref().unwrap_or_default();
    c.webhooks
        .iter()
        .flatten()
        .map(|w| {
            hook(Common {
                config,
                name: &w.name,
                rules: w.rules.as_ref(),
                failure_policy: w.failure_policy.as_deref(),
                match_policy: w.match_policy.as_deref(),
                namespace_selector: w.namespace_selector.as_ref(),
                object_selector: w.object_selector.as_ref(),
                side_effects: &w.side_effects,
                timeout_seconds: w.timeout_seconds,
                reinvoke: false,
                match_conditions: w.match_conditions.as_ref(),
                client: &w.client_config,
            })
        })
        .collect()
}

//! `bosun apply` (client-side apply, interchangeable with kubectl's) and
//! `bosun create`.

use anyhow::{anyhow, Context as _, Result};
use clap::Args;
use serde_json::{Map, Value};

use bosun::patch::three_way_strategic_patch;
use bosun::resources::ResourceInfo;

use kube::api::{DynamicObject, Patch, PatchParams, PostParams};

use super::client::Ctx;
use super::discovered;
use super::errors;
use super::manifest::{load, Manifest};
use super::output::sort_keys;

/// The annotation kubectl keeps the last applied manifest in.
pub use bosun::well_known::LAST_APPLIED;

#[derive(Debug, Args)]
pub struct ApplyArgs {
    /// File, directory or `-` (stdin) with the manifests.
    #[arg(short = 'f', long = "filename", required = true)]
    files: Vec<String>,
    /// Process the directory given in -f recursively.
    #[arg(short = 'R', long)]
    recursive: bool,
    /// Record the command in the `kubernetes.io/change-cause` annotation.
    #[arg(long, default_value_t = false, action = clap::ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    record: bool,
}

/// The resource a manifest is of, or kubectl's error for an unknown kind.
/// Kinds not in bosun's table (custom resources) are looked up in the
/// server's discovery.
pub async fn resource_of(ctx: &Ctx, m: &Manifest) -> Result<&'static ResourceInfo> {
    if let Some(info) = discovered::by_kind(m.api_version(), m.kind()) {
        return Ok(info);
    }
    // A miss reads discovery again (a CRD applied a moment ago).
    let _ = discovered::refresh(ctx).await;
    discovered::by_kind(m.api_version(), m.kind()).ok_or_else(|| {
        anyhow!(
            "resource mapping not found for name: \"{}\" namespace: \"{}\" from \"{}\": no matches for kind \"{}\" in version \"{}\"",
            m.name(),
            m.namespace().unwrap_or(""),
            m.source,
            m.kind(),
            m.api_version()
        )
    })
}

/// The namespace an object goes to: the manifest's, else `-n`/the context's.
/// A manifest namespace that contradicts an explicit `-n` is an error, as in kubectl.
pub fn namespace_of(
    ctx: &Ctx,
    info: &ResourceInfo,
    m: &Manifest,
    explicit_ns: bool,
) -> Result<Option<String>> {
    if !info.namespaced {
        return Ok(None);
    }
    match m.namespace() {
        Some(ns) if explicit_ns && ns != ctx.namespace => Err(anyhow!(
            "the namespace from the provided object \"{ns}\" does not match the namespace \"{}\". You must pass '--namespace={ns}' to perform this operation.",
            ctx.namespace
        )),
        Some(ns) => Ok(Some(ns.to_string())),
        None => Ok(Some(ctx.namespace.clone())),
    }
}

/// The object as kubectl apply sends it: the manifest with its namespace
/// set and the last-applied annotation holding the manifest itself (compact
/// JSON, keys sorted, trailing newline, `annotations` left in as `{}` when
/// empty, exactly as kubectl writes it, so the two can take turns).
pub fn with_last_applied(object: &Value, namespace: Option<&str>) -> Value {
    let mut obj = object.clone();
    let meta = obj
        .as_object_mut()
        .expect("manifests are objects")
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    if !meta.is_object() {
        *meta = Value::Object(Map::new());
    }
    let meta = meta.as_object_mut().expect("just made an object");
    if let Some(ns) = namespace {
        meta.insert("namespace".into(), Value::String(ns.to_string()));
    }
    let annotations = meta
        .entry("annotations")
        .or_insert_with(|| Value::Object(Map::new()));
    if !annotations.is_object() {
        *annotations = Value::Object(Map::new());
    }
    annotations
        .as_object_mut()
        .expect("just made an object")
        .remove(LAST_APPLIED);
    let mut recorded =
        go_json(&serde_json::to_string(&sort_keys(&obj)).expect("JSON values serialize"));
    recorded.push('\n');
    obj["metadata"]["annotations"][LAST_APPLIED] = Value::String(recorded);
    obj
}

/// JSON escaped as Go's encoding/json writes it (`<`, `>`, `&`, U+2028 and
/// U+2029 as `\uXXXX`), so the annotation is byte-for-byte kubectl's and
/// the two tools can take turns applying.
fn go_json(s: &str) -> String {
    s.replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('&', "\\u0026")
        .replace('\u{2028}', "\\u2028")
        .replace('\u{2029}', "\\u2029")
}

/// The last-applied manifest recorded on a live object, if any.
pub fn last_applied(current: &Value) -> Option<Value> {
    current["metadata"]["annotations"][LAST_APPLIED]
        .as_str()
        .and_then(|s| serde_json::from_str(s).ok())
}

#[derive(Debug, PartialEq, Eq)]
pub enum ApplyResult {
    Created,
    Configured,
    Unchanged,
}

impl ApplyResult {
    fn word(&self) -> &'static str {
        match self {
            ApplyResult::Created => "created",
            ApplyResult::Configured => "configured",
            ApplyResult::Unchanged => "unchanged",
        }
    }
}

async fn apply_one(ctx: &Ctx, m: &Manifest, explicit_ns: bool) -> Result<(String, ApplyResult)> {
    let info = resource_of(ctx, m).await?;
    let ns = namespace_of(ctx, info, m, explicit_ns)?;
    let name = m.name();
    if name.is_empty() {
        return Err(anyhow!(
            "error when retrieving current configuration of \"{}\" document {}: resource name may not be empty",
            m.source,
            m.document
        ));
    }
    let printed = format!("{}/{name}", info.kind_group());
    let modified = with_last_applied(&m.object, ns.as_deref());
    let api = ctx.api(info, ns.as_deref());
    let current = api.get_opt(name).await.with_context(|| {
        format!(
            "error when retrieving current configuration of \"{}\"",
            m.source
        )
    })?;
    let Some(current) = current else {
        let object: DynamicObject = serde_json::from_value(modified)?;
        api.create(&PostParams::default(), &object)
            .await
            .with_context(|| format!("error when creating \"{}\"", m.source))?;
        return Ok((printed, ApplyResult::Created));
    };
    let current = serde_json::to_value(&current)?;
    let original = last_applied(&current);
    let patch = three_way_strategic_patch(original.as_ref(), &modified, &current);
    if patch.as_object().is_some_and(|p| p.is_empty()) {
        return Ok((printed, ApplyResult::Unchanged));
    }
    // kube sends Patch::Strategic as application/strategic-merge-patch+json.
    api.patch(name, &PatchParams::default(), &Patch::Strategic(&patch))
        .await
        .with_context(|| format!("error when applying patch to \"{}\"", m.source))?;
    Ok((printed, ApplyResult::Configured))
}

pub async fn apply(ctx: &Ctx, args: &ApplyArgs, explicit_ns: bool) -> Result<bool> {
    let manifests = load(&args.files, args.recursive)?;
    let mut ok = true;
    for m in &manifests {
        let result = async {
            let (name, result) = apply_one(ctx, m, explicit_ns).await?;
            if args.record {
                // Not part of the applied configuration: a separate write, as kubectl's.
                let info = resource_of(ctx, m).await?;
                let ns = namespace_of(ctx, info, m, explicit_ns)?;
                let path = Ctx::object_path(info, ns.as_deref(), m.name());
                super::scale::annotate_change_cause(ctx, &path).await?;
            }
            anyhow::Ok((name, result))
        }
        .await;
        if let Some((name, result)) = errors::report(result, &mut ok) {
            println!("{name} {}", result.word());
        }
    }
    Ok(ok)
}

/// `create -f`: each manifest POSTed as it is.
pub async fn create_files(
    ctx: &Ctx,
    files: &[String],
    recursive: bool,
    record: bool,
    explicit_ns: bool,
) -> Result<bool> {
    let manifests = load(files, recursive)?;
    let mut ok = true;
    for m in &manifests {
        let result = async {
            let info = resource_of(ctx, m).await?;
            let ns = namespace_of(ctx, info, m, explicit_ns)?;
            let mut obj = m.object.clone();
            if let Some(ns) = &ns {
                obj["metadata"]["namespace"] = Value::String(ns.clone());
            }
            if record {
                obj["metadata"]["annotations"][super::record::CHANGE_CAUSE] =
                    Value::String(super::record::command_line());
            }
            ctx.request_json(
                http::Method::POST,
                &info.collection_path(ns.as_deref()),
                None,
                Some("application/json"),
                Some(&obj),
            )
            .await
            .with_context(|| format!("error when creating \"{}\"", m.source))?;
            anyhow::Ok(format!("{}/{}", info.kind_group(), m.name()))
        }
        .await;
        if let Some(name) = errors::report(result, &mut ok) {
            println!("{name} created");
        }
    }
    Ok(ok)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn annotation_is_what_kubectl_writes() {
        let manifest = json!({
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "nginx-deployment", "labels": {"app": "nginx"}},
            "spec": {"replicas": 3}
        });
        let obj = with_last_applied(&manifest, Some("default"));
        assert_eq!(obj["metadata"]["namespace"], "default");
        assert_eq!(
            obj["metadata"]["annotations"][LAST_APPLIED],
            "{\"apiVersion\":\"apps/v1\",\"kind\":\"Deployment\",\"metadata\":{\"annotations\":{},\"labels\":{\"app\":\"nginx\"},\"name\":\"nginx-deployment\",\"namespace\":\"default\"},\"spec\":{\"replicas\":3}}\n"
        );
        // Re-applying an object that already carries an annotation records it without the old one.
        let again = with_last_applied(&obj, Some("default"));
        assert_eq!(again, obj);
        assert_eq!(last_applied(&obj).unwrap()["spec"]["replicas"], 3);
    }

    #[test]
    fn user_annotations_are_kept_in_the_record() {
        let manifest = json!({
            "apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": "web", "annotations": {"team": "a"}}
        });
        let obj = with_last_applied(&manifest, None);
        let rec = last_applied(&obj).unwrap();
        assert_eq!(rec["metadata"]["annotations"], json!({"team": "a"}));
        assert!(rec["metadata"].get("namespace").is_none());
    }

    #[test]
    fn reapplying_gives_an_empty_patch_and_a_change_gives_only_the_change() {
        let manifest = json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "d"},
            "spec": {"replicas": 3, "template": {"spec": {"containers": [{"name": "c", "image": "nginx"}]}}}});
        let modified = with_last_applied(&manifest, Some("default"));
        let mut current = modified.clone();
        current["metadata"]["uid"] = json!("u");
        current["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"] = json!("Always");
        current["status"] = json!({"replicas": 3});
        let original = last_applied(&current);
        let p = three_way_strategic_patch(original.as_ref(), &modified, &current);
        assert_eq!(p, json!({}));

        let mut manifest2 = manifest.clone();
        manifest2["spec"]["replicas"] = json!(5);
        let modified2 = with_last_applied(&manifest2, Some("default"));
        let p = three_way_strategic_patch(original.as_ref(), &modified2, &current);
        assert_eq!(p["spec"], json!({"replicas": 5}));
        assert!(p["metadata"]["annotations"][LAST_APPLIED].is_string());
    }
}

//! `bosun create`: from files (as `apply`'s loader reads them), or one of
//! kubectl's generators — `create job NAME --from=cronjob/X` (a Job from a
//! CronJob's template, run at once), `create job NAME --image=I -- CMD`,
//! `create configmap` and `create secret generic|tls|docker-registry`
//! (their objects built in [`super::create_data`]).

use anyhow::{anyhow, bail, Context as _, Result};
use serde_json::{json, Map, Value};

use super::apply;
use super::client::Ctx;
use super::create_data::{self, DataSources};
use bosun::resources::by_name;

/// The annotation kubectl marks a Job made by hand from a CronJob with.
pub const INSTANTIATE: &str = "cronjob.kubernetes.io/instantiate";

#[derive(Debug, clap::Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct CreateArgs {
    /// File, directory or `-` (stdin) with the manifests.
    #[arg(short = 'f', long = "filename")]
    files: Vec<String>,
    /// Process the directory given in -f recursively.
    #[arg(short = 'R', long)]
    recursive: bool,
    /// Record the command in the `kubernetes.io/change-cause` annotation.
    #[arg(long, default_value_t = false, action = clap::ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    record: bool,
    #[command(subcommand)]
    generator: Option<Generator>,
}

#[derive(Debug, clap::Subcommand)]
enum Generator {
    /// Create a job with the specified name.
    Job(JobArgs),
    /// Create a config map from a local file, directory or literal value.
    #[command(visible_alias = "cm")]
    Configmap(ConfigMapArgs),
    /// Create a secret.
    Secret {
        #[command(subcommand)]
        kind: SecretKind,
    },
}

#[derive(Debug, clap::Args)]
struct ConfigMapArgs {
    name: String,
    #[command(flatten)]
    sources: DataSources,
}

#[derive(Debug, clap::Subcommand)]
enum SecretKind {
    /// Create a secret from a local file, directory or literal value.
    Generic {
        name: String,
        #[command(flatten)]
        sources: DataSources,
        /// The type of secret to create.
        #[arg(long = "type")]
        type_: Option<String>,
    },
    /// Create a TLS secret from a certificate and its key.
    Tls {
        name: String,
        /// Path to PEM encoded public key certificate.
        #[arg(long)]
        cert: String,
        /// Path to private key associated with given certificate.
        #[arg(long)]
        key: String,
    },
    /// Create a secret for use with a Docker registry.
    DockerRegistry {
        name: String,
        /// Server location for Docker registry.
        #[arg(long, default_value = "https://index.docker.io/v1/")]
        docker_server: String,
        /// Username for Docker registry authentication.
        #[arg(long)]
        docker_username: String,
        /// Password for Docker registry authentication.
        #[arg(long)]
        docker_password: String,
        /// Email for Docker registry.
        #[arg(long, default_value = "")]
        docker_email: String,
    },
}

#[derive(Debug, clap::Args)]
struct JobArgs {
    /// The job's name.
    name: String,
    /// The resource to create the job from (only cronjob is supported).
    #[arg(long)]
    from: Option<String>,
    /// Image name to run.
    #[arg(long)]
    image: Option<String>,
    /// The command to run, after `--`.
    #[arg(last = true)]
    command: Vec<String>,
}

pub async fn create(ctx: &Ctx, args: &CreateArgs, explicit_ns: bool) -> Result<bool> {
    match &args.generator {
        Some(Generator::Job(job)) => create_job(ctx, job).await,
        Some(Generator::Configmap(cm)) => {
            let entries = create_data::gather("ConfigMap", &cm.name, &cm.sources)?;
            post(
                ctx,
                "configmaps",
                &cm.name,
                create_data::config_map(&cm.name, entries),
            )
            .await
        }
        Some(Generator::Secret { kind }) => {
            let (name, secret) = match kind {
                SecretKind::Generic {
                    name,
                    sources,
                    type_,
                } => {
                    let entries = create_data::gather("Secret", name, sources)?;
                    (name, create_data::secret(name, type_.as_deref(), entries))
                }
                SecretKind::Tls { name, cert, key } => {
                    (name, create_data::tls_secret(name, cert, key)?)
                }
                SecretKind::DockerRegistry {
                    name,
                    docker_server,
                    docker_username,
                    docker_password,
                    docker_email,
                } => (
                    name,
                    create_data::docker_registry_secret(
                        name,
                        docker_server,
                        docker_username,
                        docker_password,
                        docker_email,
                    ),
                ),
            };
            post(ctx, "secrets", name, secret).await
        }
        None => {
            if args.files.is_empty() {
                bail!("must specify one of -f and -k");
            }
            apply::create_files(ctx, &args.files, args.recursive, args.record, explicit_ns).await
        }
    }
}

/// kubectl's `createJobFromCronJob`: the template's labels, annotations
/// (plus `cronjob.kubernetes.io/instantiate: manual`) and spec, with a
/// controller reference to the CronJob (no blockOwnerDeletion, as kubectl).
pub fn job_from_cronjob(name: &str, cronjob: &Value) -> Value {
    let template = &cronjob["spec"]["jobTemplate"];
    let mut annotations = template["metadata"]["annotations"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    annotations.insert(INSTANTIATE.into(), json!("manual"));
    let mut metadata = Map::new();
    metadata.insert("name".into(), json!(name));
    metadata.insert("annotations".into(), Value::Object(annotations));
    if let Some(labels) = template["metadata"].get("labels") {
        metadata.insert("labels".into(), labels.clone());
    }
    metadata.insert(
        "ownerReferences".into(),
        json!([{
            "apiVersion": "batch/v1",
            "kind": "CronJob",
            "name": cronjob["metadata"]["name"],
            "uid": cronjob["metadata"]["uid"],
            "controller": true,
        }]),
    );
    json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": metadata,
        "spec": template["spec"],
    })
}

/// kubectl's `createJob` for `--image`: one container named after the
/// job, restartPolicy Never.
fn job_from_image(name: &str, image: &str, command: &[String]) -> Value {
    let mut container = json!({"name": name, "image": image});
    if !command.is_empty() {
        container["command"] = json!(command);
    }
    json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {"template": {"spec": {"containers": [container], "restartPolicy": "Never"}}},
    })
}

/// Creates `obj` in the context's namespace and prints kubectl's
/// `configmap/NAME created`.
async fn post(ctx: &Ctx, resource: &str, name: &str, obj: Value) -> Result<bool> {
    let res = by_name(resource).expect("served");
    ctx.request_json(
        http::Method::POST,
        &res.collection_path(Some(&ctx.namespace)),
        None,
        Some("application/json"),
        Some(&obj),
    )
    .await?;
    println!("{}/{name} created", res.kind_group());
    Ok(true)
}

async fn create_job(ctx: &Ctx, args: &JobArgs) -> Result<bool> {
    let jobs = by_name("jobs.batch").expect("jobs are served");
    let job = match (&args.from, &args.image) {
        (Some(_), Some(_)) => bail!("--image and --from are mutually exclusive"),
        (None, None) => bail!("either --image or --from must be specified"),
        (Some(_), None) if !args.command.is_empty() => {
            bail!("cannot specify --from and command")
        }
        (None, Some(image)) => job_from_image(&args.name, image, &args.command),
        (Some(from), None) => {
            let (kind, source) = from
                .split_once('/')
                .ok_or_else(|| anyhow!("--from must be of the form TYPE/NAME, got {from:?}"))?;
            let info = by_name(kind)
                .ok_or_else(|| anyhow!("the server doesn't have a resource type \"{kind}\""))?;
            if info.kind != "CronJob" {
                bail!("unknown object type {}", info.kind);
            }
            let path = Ctx::object_path(info, Some(&ctx.namespace), source);
            let cronjob = ctx.get_json(&path).await?;
            job_from_cronjob(&args.name, &cronjob)
        }
    };
    ctx.request_json(
        http::Method::POST,
        &jobs.collection_path(Some(&ctx.namespace)),
        None,
        Some("application/json"),
        Some(&job),
    )
    .await
    .context("failed to create job")?;
    println!("job.batch/{} created", args.name);
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_from_a_cronjob_is_what_kubectl_makes() {
        let cj = json!({
            "metadata": {"name": "hello", "uid": "u-1"},
            "spec": {"schedule": "*/1 * * * *", "jobTemplate": {
                "metadata": {"labels": {"app": "hello"}, "annotations": {"a": "b"}},
                "spec": {"backoffLimit": 2, "template": {"spec": {"containers": []}}}}}
        });
        let job = job_from_cronjob("manual-1", &cj);
        assert_eq!(job["metadata"]["name"], "manual-1");
        assert_eq!(job["metadata"]["labels"], json!({"app": "hello"}));
        assert_eq!(
            job["metadata"]["annotations"],
            json!({"a": "b", "cronjob.kubernetes.io/instantiate": "manual"})
        );
        assert_eq!(
            job["metadata"]["ownerReferences"],
            json!([{"apiVersion": "batch/v1", "kind": "CronJob", "name": "hello",
                    "uid": "u-1", "controller": true}])
        );
        assert_eq!(job["spec"]["backoffLimit"], 2);
    }
}

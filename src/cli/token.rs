//! `bosun token create|list|delete`: bootstrap tokens other hosts join
//! with, as `kubeadm token`. A token is a `bootstrap.kubernetes.io/token`
//! Secret in kube-system; it expires after its TTL (the control plane
//! refuses and deletes it then) and deleting it revokes it.

use anyhow::{anyhow, bail, Context as _, Result};
use base64::Engine;
use bosun::bootstrap::{self as bt, BootstrapToken};
use chrono::Utc;
use clap::{Args, Subcommand};
use serde_json::Value;

use super::client::Ctx;
use super::delete::parse_duration;

#[derive(Debug, Args)]
pub struct TokenArgs {
    #[command(subcommand)]
    command: TokenCommand,
}

#[derive(Debug, Subcommand)]
enum TokenCommand {
    /// Create a bootstrap token and print it (and the join command).
    Create(CreateArgs),
    /// List the bootstrap tokens that have not expired.
    List,
    /// Delete (revoke) bootstrap tokens, by id or whole token.
    Delete {
        #[arg(required = true, value_name = "ID")]
        ids: Vec<String>,
    },
}

#[derive(Debug, Args)]
struct CreateArgs {
    /// How long the token is good for (e.g. 30m, 24h); 0 never expires.
    #[arg(long, default_value = "24h")]
    ttl: String,
    /// What the token is for, shown by `bosun token list`.
    #[arg(long)]
    description: Option<String>,
    /// Print the whole `bosun join` command, not only the token.
    #[arg(long)]
    print_join_command: bool,
}

fn secrets_path() -> String {
    format!("/api/v1/namespaces/{}/secrets", bt::NAMESPACE)
}

pub async fn token(ctx: &Ctx, args: &TokenArgs) -> Result<bool> {
    match &args.command {
        TokenCommand::Create(c) => {
            let ttl = parse_duration(&c.ttl).map_err(|e| anyhow!("--ttl: {e}"))?;
            let t = create(ctx, ttl, c.description.as_deref()).await?;
            if c.print_join_command {
                println!("{}", join_command(ctx, &t).await?);
            } else {
                println!("{t}");
            }
        }
        TokenCommand::List => list(ctx).await?,
        TokenCommand::Delete { ids } => {
            for id in ids {
                let id = id.split('.').next().unwrap_or(id);
                let path = format!("{}/{}", secrets_path(), bt::secret_name(id));
                match ctx
                    .request_json(http::Method::DELETE, &path, None, None, None)
                    .await
                {
                    Ok(_) => println!("bootstrap token \"{id}\" deleted"),
                    Err(kube::Error::Api(s)) if s.code == 404 => {
                        bail!("bootstrap token \"{id}\" not found")
                    }
                    Err(e) => return Err(e).context(format!("deleting bootstrap token {id}")),
                }
            }
        }
    }
    Ok(true)
}

/// Makes a token good for `ttl` (zero: until deleted).
pub async fn create(
    ctx: &Ctx,
    ttl: std::time::Duration,
    description: Option<&str>,
) -> Result<BootstrapToken> {
    let t = BootstrapToken::generate();
    let expires = (!ttl.is_zero())
        .then(|| Utc::now() + chrono::Duration::from_std(ttl).unwrap_or(chrono::Duration::MAX));
    ctx.request_json(
        http::Method::POST,
        &secrets_path(),
        None,
        Some("application/json"),
        Some(&t.secret(description, expires)),
    )
    .await
    .context("creating the bootstrap token's Secret")?;
    Ok(t)
}

/// `bosun join <server> --token <t> --ca-cert-hash sha256:<hex>`, with
/// the server and CA kube-public's cluster-info publishes.
pub async fn join_command(ctx: &Ctx, t: &BootstrapToken) -> Result<String> {
    let path = format!(
        "/api/v1/namespaces/{}/configmaps/{}",
        bt::CLUSTER_INFO_NAMESPACE,
        bt::CLUSTER_INFO
    );
    let info = ctx.get_json(&path).await.context("reading cluster-info")?;
    let (server, ca) = cluster_info(&info)?;
    let hash = bt::ca_cert_hash(&ca).map_err(|e| anyhow!(e))?;
    Ok(format!(
        "bosun join {server} --token {t} --ca-cert-hash {hash}"
    ))
}

/// The server and CA (PEM) of a cluster-info ConfigMap.
pub fn cluster_info(cm: &Value) -> Result<(String, String)> {
    let text = cm["data"]["kubeconfig"]
        .as_str()
        .ok_or_else(|| anyhow!("cluster-info has no kubeconfig"))?;
    // `bosun join` reads it before it trusts the server: its aliases may
    // not expand past a bound (cluster-info is a few kilobytes).
    let kc = bosun::yaml::from_str_bounded(text, 1 << 20)
        .context("cluster-info's kubeconfig does not parse")?;
    let cluster = &kc["clusters"][0]["cluster"];
    let server = cluster["server"]
        .as_str()
        .ok_or_else(|| anyhow!("cluster-info names no server"))?
        .to_string();
    let ca = cluster["certificate-authority-data"]
        .as_str()
        .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok())
        .and_then(|b| String::from_utf8(b).ok())
        .ok_or_else(|| anyhow!("cluster-info holds no CA"))?;
    Ok((server, ca))
}

async fn list(ctx: &Ctx) -> Result<()> {
    let list = ctx.get_json(&secrets_path()).await?;
    let now = Utc::now();
    let mut rows = vec![[
        "TOKEN".to_string(),
        "TTL".into(),
        "EXPIRES".into(),
        "DESCRIPTION".into(),
    ]];
    for s in list["items"].as_array().into_iter().flatten() {
        if s["type"] != bt::SECRET_TYPE || bt::is_expired(s, now) {
            continue;
        }
        let (Some(id), Some(secret)) = (
            bt::secret_field(s, "token-id"),
            bt::secret_field(s, "token-secret"),
        ) else {
            continue;
        };
        let (ttl, expires) = match bt::expiration(s) {
            Some(t) => (bosun::printers::human_duration(t - now), bt::rfc3339(t)),
            None => ("<forever>".into(), "<never>".into()),
        };
        rows.push([
            format!("{id}.{secret}"),
            ttl,
            expires,
            bt::secret_field(s, "description").unwrap_or_else(|| "<none>".into()),
        ]);
    }
    let widths: Vec<usize> = (0..4)
        .map(|i| rows.iter().map(|r| r[i].len()).max().unwrap_or(0))
        .collect();
    for r in rows {
        let line: Vec<String> = r
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        println!("{}", line.join("   ").trim_end());
    }
    Ok(())
}

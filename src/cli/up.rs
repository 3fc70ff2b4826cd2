//! `bosun up` / `bosun down`: run the local control plane in the background
//! and point a kubeconfig at it.
//!
//! Every background process is a [`Component`] with its pid file and log in
//! the data directory; `up` starts them in order, `down` stops them in
//! reverse. The agent (`bosun-agent`) joins the list once it exists.

use std::fs::OpenOptions;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{anyhow, bail, Context as _, Result};
use clap::Args;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use super::client::{bosun_kubeconfig, home_dir};
use super::delete::parse_duration;
use super::purge;

#[derive(Debug, Args)]
pub struct UpArgs {
    /// Where the control plane keeps its data, token, address and log.
    #[arg(long, value_name = "DIR")]
    data_dir: Option<PathBuf>,
    /// Port to listen on (0 picks a free one).
    #[arg(long, default_value_t = 6443)]
    port: u16,
    /// How long to wait for the control plane to become ready.
    #[arg(long, default_value = "30s")]
    timeout: String,
    /// Start only the control plane, no local agent.
    #[arg(long)]
    no_agent: bool,
    #[command(flatten)]
    node: NodeArgs,
    /// The address other hosts reach the control plane at: it then
    /// listens on every interface, its certificate covers the address, and
    /// the printed `bosun join` command names it.
    #[arg(long, value_name = "ADDR")]
    advertise_address: Option<String>,
}

/// What `bosun up` and `bosun join` both tell the agent they start about
/// its node.
#[derive(Debug, Args)]
pub(super) struct NodeArgs {
    /// The node's name (default: the hostname).
    #[arg(long)]
    pub node_name: Option<String>,
    /// The node's address, which other hosts route its pods through;
    /// needed when the host has several (never Vagrant's NAT address).
    #[arg(long, conflicts_with = "node_interface", value_name = "IP")]
    pub node_ip: Option<std::net::IpAddr>,
    /// The interface whose IPv4 address is the node's address (e.g. eth1).
    #[arg(long, value_name = "IFACE")]
    pub node_interface: Option<String>,
    /// The node's pod CIDR (default: the one the control plane assigns).
    #[arg(long, value_name = "CIDR")]
    pub pod_cidr: Option<String>,
}

impl NodeArgs {
    /// The node's name: --node-name, else the hostname.
    pub fn name(&self) -> Result<String> {
        Ok(match &self.node_name {
            Some(n) => n.clone(),
            None => nix::unistd::gethostname()?.to_string_lossy().into_owned(),
        })
    }

    /// The agent's flags for them (all but the name, which the caller
    /// resolves once with [`NodeArgs::name`]).
    pub fn agent_args(&self) -> Vec<String> {
        let mut args = Vec::new();
        if let Some(ip) = &self.node_ip {
            args.extend(["--node-ip".to_string(), ip.to_string()]);
        }
        if let Some(iface) = &self.node_interface {
            args.extend(["--node-interface".to_string(), iface.clone()]);
        }
        if let Some(cidr) = &self.pod_cidr {
            args.extend(["--pod-cidr".to_string(), cidr.clone()]);
        }
        args
    }
}

#[derive(Debug, Args)]
pub struct DownArgs {
    /// The data directory given to `bosun up`.
    #[arg(long, value_name = "DIR")]
    data_dir: Option<PathBuf>,
    /// How long to wait for each process to exit.
    #[arg(long, default_value = "30s")]
    timeout: String,
    /// Also remove everything bosun made on this host: the node's pods'
    /// containers, its Docker network and iptables rule, the control
    /// plane's and the agent's data, and bosun's kubeconfig entries.
    #[arg(long)]
    purge: bool,
    /// With --purge: do not ask first.
    #[arg(long, short = 'y')]
    yes: bool,
}

/// A process `bosun up` runs in the background.
pub(super) struct Component {
    /// Shown to the user.
    title: &'static str,
    /// The executable, looked up next to `bosun` and then on PATH.
    binary: &'static str,
    /// `DIR/<name>.pid` and `DIR/<name>.log`.
    name: &'static str,
}

const CONTROL: Component = Component {
    title: "control plane",
    binary: "bosun-control",
    name: "control",
};

/// The local node's agent: started once CONTROL is ready, stopped before it.
pub(super) const AGENT: Component = Component {
    title: "agent",
    binary: "bosun-agent",
    name: "agent",
};

fn default_data_dir() -> PathBuf {
    home_dir().join(".bosun").join("control")
}

impl Component {
    pub(super) fn pid_file(&self, dir: &Path) -> PathBuf {
        dir.join(format!("{}.pid", self.name))
    }
    pub(super) fn log_file(&self, dir: &Path) -> PathBuf {
        dir.join(format!("{}.log", self.name))
    }

    /// The recorded pid, if that process is still running this component's binary.
    pub(super) fn running_pid(&self, dir: &Path) -> Option<i32> {
        let pid: i32 = std::fs::read_to_string(self.pid_file(dir))
            .ok()?
            .trim()
            .parse()
            .ok()?;
        (is_alive(pid) && runs_binary(pid, self.binary)).then_some(pid)
    }

    pub(super) fn find_binary(&self) -> Result<PathBuf> {
        if let Some(dir) = std::env::current_exe()
            .ok()
            .and_then(|e| e.parent().map(Path::to_path_buf))
        {
            let candidate = dir.join(self.binary);
            if candidate.is_file() {
                return Ok(candidate);
            }
        }
        if let Some(path) = std::env::var_os("PATH") {
            for dir in std::env::split_paths(&path) {
                let candidate = dir.join(self.binary);
                if candidate.is_file() {
                    return Ok(candidate);
                }
            }
        }
        bail!(
            "cannot find {} next to {} or on PATH (build it with `cargo build --workspace`)",
            self.binary,
            std::env::current_exe()
                .map(|p| p.display().to_string())
                .unwrap_or_else(|_| "bosun".into())
        )
    }

    /// Starts the process detached from this one: its own process group,
    /// stdin from /dev/null, stdout and stderr appended to its log.
    pub(super) fn spawn(&self, dir: &Path, args: &[String]) -> Result<std::process::Child> {
        let binary = self.find_binary()?;
        let log_path = self.log_file(dir);
        let log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)
            .with_context(|| format!("opening {}", log_path.display()))?;
        let child = Command::new(&binary)
            .args(args)
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .process_group(0)
            .spawn()
            .with_context(|| format!("starting {}", binary.display()))?;
        std::fs::write(self.pid_file(dir), format!("{}\n", child.id()))?;
        Ok(child)
    }
}

/// Whether the process exists and is not a zombie.
fn is_alive(pid: i32) -> bool {
    if kill(Pid::from_raw(pid), None).is_err() {
        return false;
    }
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the parenthesised command name.
        Ok(stat) => stat
            .rsplit_once(')')
            .map(|(_, rest)| !rest.trim_start().starts_with('Z'))
            .unwrap_or(true),
        Err(_) => true,
    }
}

/// Guards against signalling a recycled pid.
fn runs_binary(pid: i32, binary: &str) -> bool {
    match std::fs::read(format!("/proc/{pid}/cmdline")) {
        Ok(cmd) => cmd
            .split(|b| *b == 0)
            .next()
            .is_some_and(|argv0| String::from_utf8_lossy(argv0).ends_with(binary)),
        Err(_) => true,
    }
}

fn tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// The server's own admin kubeconfig: `https://ADDR`, its CA and the admin token.
struct AdminConfig {
    /// The `cluster` body (server, certificate-authority-data).
    cluster: serde_yaml::Value,
    server: String,
    token: String,
}

fn read_admin_config(path: &Path) -> Result<AdminConfig> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let doc: serde_yaml::Value =
        serde_yaml::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
    let cluster = doc["clusters"][0]["cluster"].clone();
    let server = cluster["server"]
        .as_str()
        .ok_or_else(|| anyhow!("{} names no server", path.display()))?
        .to_string();
    let token = doc["users"][0]["user"]["token"]
        .as_str()
        .ok_or_else(|| anyhow!("{} holds no token", path.display()))?
        .to_string();
    Ok(AdminConfig {
        cluster,
        server,
        token,
    })
}

/// GET /readyz through a client built from the admin kubeconfig (TLS with
/// the server's CA); true on a 200.
async fn ready(admin_kubeconfig: &Path) -> bool {
    let attempt = async {
        let kc = kube::config::Kubeconfig::read_from(admin_kubeconfig).ok()?;
        let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
            .await
            .ok()?;
        let client = kube::Client::try_from(config).ok()?;
        let req = http::Request::get("/readyz").body(Vec::new()).ok()?;
        client.request_text(req).await.ok()
    };
    matches!(
        tokio::time::timeout(Duration::from_secs(3), attempt).await,
        Ok(Some(_))
    )
}

fn read_trimmed(path: &Path) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

/// Writes (or updates, keeping other entries) a kubeconfig whose `bosun`
/// context points at `cluster` (server and CA) with `token`.
pub fn write_kubeconfig(path: &Path, cluster: &serde_yaml::Value, token: &str) -> Result<()> {
    use serde_yaml::{Mapping, Value};
    let mut doc: Value = std::fs::read_to_string(path)
        .ok()
        .and_then(|t| serde_yaml::from_str(&t).ok())
        .filter(Value::is_mapping)
        .unwrap_or_else(|| Value::Mapping(Mapping::new()));
    let entry = |name: &str, key: &str, body: Value| {
        let mut m = Mapping::new();
        m.insert("name".into(), name.into());
        m.insert(key.into(), body);
        Value::Mapping(m)
    };
    let mut user = Mapping::new();
    user.insert("token".into(), token.into());
    let mut context = Mapping::new();
    context.insert("cluster".into(), "bosun".into());
    context.insert("user".into(), "bosun-admin".into());
    context.insert("namespace".into(), "default".into());
    let upserts = [
        ("clusters", entry("bosun", "cluster", cluster.clone())),
        ("users", entry("bosun-admin", "user", Value::Mapping(user))),
        (
            "contexts",
            entry("bosun", "context", Value::Mapping(context)),
        ),
    ];
    let map = doc.as_mapping_mut().expect("checked to be a mapping");
    map.insert("apiVersion".into(), "v1".into());
    map.insert("kind".into(), "Config".into());
    for (list, item) in upserts {
        let seq = map
            .entry(list.into())
            .or_insert_with(|| Value::Sequence(Vec::new()));
        if !seq.is_sequence() {
            *seq = Value::Sequence(Vec::new());
        }
        let seq = seq.as_sequence_mut().expect("just made a sequence");
        seq.retain(|e| e.get("name") != item.get("name"));
        seq.push(item);
    }
    map.insert("current-context".into(), "bosun".into());
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    let text = serde_yaml::to_string(&doc)?;
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))?;
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    Ok(())
}

/// `~/x` for paths under HOME, to print commands users can paste.
fn pretty(path: &Path) -> String {
    let home = home_dir();
    match path.strip_prefix(&home) {
        Ok(rest) if home != Path::new("/") => format!("~/{}", rest.display()),
        _ => path.display().to_string(),
    }
}

fn print_next_steps(server: &str, pid: i32, dir: &Path, kubeconfig: &Path) {
    let kc = pretty(kubeconfig);
    println!("  server:     {server} (pid {pid})");
    println!("  data:       {}", pretty(dir));
    println!("  logs:       {}", pretty(&CONTROL.log_file(dir)));
    println!("  kubeconfig: {kc}");
    println!();
    println!("Next:");
    println!("  bosun get nodes");
    println!("  kubectl --kubeconfig {kc} get pods");
    println!("  export KUBECONFIG={kc}");
}

/// Makes a bootstrap token good for a day and prints the command other
/// hosts join with, as `kubeadm init` does.
async fn print_join_command(admin_kubeconfig: &Path) -> Result<()> {
    let ctx = super::client::Ctx::connect(&super::client::ConnectOptions {
        kubeconfig: Some(admin_kubeconfig.to_path_buf()),
        context: None,
        namespace: None,
    })
    .await?;
    let token = super::token::create(
        &ctx,
        Duration::from_secs(24 * 3600),
        Some("made by bosun up"),
    )
    .await?;
    println!();
    println!("Other hosts join with (the token is good for 24h; `bosun token create` makes more):");
    println!("  {}", super::token::join_command(&ctx, &token).await?);
    Ok(())
}

pub async fn up(args: &UpArgs, kubeconfig: Option<&Path>) -> Result<bool> {
    let dir = args.data_dir.clone().unwrap_or_else(default_data_dir);
    let timeout = parse_duration(&args.timeout)?;
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let dir = dir.canonicalize().unwrap_or(dir);
    let kubeconfig = kubeconfig
        .map(Path::to_path_buf)
        .unwrap_or_else(bosun_kubeconfig);
    // bosun-control writes admin.kubeconfig (https://ADDR, its CA, the admin
    // token) and then `address` once it is listening.
    let address_file = dir.join("address");
    let admin_kubeconfig = dir.join("admin.kubeconfig");

    if let Some(pid) = CONTROL.running_pid(&dir) {
        if read_trimmed(&address_file).is_some() && ready(&admin_kubeconfig).await {
            let admin = read_admin_config(&admin_kubeconfig)?;
            write_kubeconfig(&kubeconfig, &admin.cluster, &admin.token)?;
            println!("bosun is already running.");
            print_next_steps(&admin.server, pid, &dir, &kubeconfig);
            return Ok(true);
        }
        bail!(
            "bosun-control (pid {pid}) is running but not ready; see {} or run `bosun down`",
            CONTROL.log_file(&dir).display()
        );
    }

    // A stale address from an earlier run must not be mistaken for this one's.
    let _ = std::fs::remove_file(&address_file);
    let mut control_args = vec![
        "--data-dir".to_string(),
        dir.display().to_string(),
        "--port".to_string(),
        args.port.to_string(),
    ];
    // Every interface, so pods reach the API through the kubernetes
    // Service at the advertised address (the kubeconfig keeps 127.0.0.1).
    control_args.extend(["--bind".into(), "0.0.0.0".into()]);
    let advertise = args
        .advertise_address
        .clone()
        .filter(|a| a.parse::<std::net::IpAddr>().is_ok())
        .or_else(|| args.node.node_ip.map(|ip| ip.to_string()));
    if let Some(addr) = advertise {
        control_args.extend(["--advertise-address".into(), addr]);
    }
    if let Some(addr) = &args.advertise_address {
        control_args.extend(["--tls-san".into(), addr.clone()]);
    }
    let mut child = CONTROL.spawn(&dir, &control_args)?;
    let pid = child.id() as i32;
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Some(status) = child.try_wait()? {
            let _ = std::fs::remove_file(CONTROL.pid_file(&dir));
            bail!(
                "bosun-control exited ({status}) before becoming ready; last lines of {}:\n{}",
                CONTROL.log_file(&dir).display(),
                tail(&CONTROL.log_file(&dir), 20)
            );
        }
        if read_trimmed(&address_file).is_some() && ready(&admin_kubeconfig).await {
            break;
        }
        if tokio::time::Instant::now() >= deadline {
            bail!(
                "bosun-control (pid {pid}) did not become ready within {}; see {}",
                args.timeout,
                CONTROL.log_file(&dir).display()
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let admin = read_admin_config(&admin_kubeconfig)?;
    write_kubeconfig(&kubeconfig, &admin.cluster, &admin.token)?;
    // What `bosun down --purge` removes.
    std::fs::write(
        dir.join(purge::KUBECONFIG_FILE),
        kubeconfig.display().to_string(),
    )?;
    if !args.no_agent {
        start_agent(args, &dir, &admin_kubeconfig, timeout).await?;
    }
    println!("bosun is up.");
    print_next_steps(&admin.server, pid, &dir, &kubeconfig);
    print_join_command(&admin_kubeconfig).await?;
    Ok(true)
}

/// Starts the local agent (unless it runs already) and waits until its
/// Node is registered.
async fn start_agent(
    args: &UpArgs,
    dir: &Path,
    admin_kubeconfig: &Path,
    timeout: Duration,
) -> Result<()> {
    let node = args.node.name()?;
    if AGENT.running_pid(dir).is_some() {
        return Ok(());
    }
    std::fs::write(dir.join(purge::NODE_FILE), &node)?;
    let agent_data = agent_data_dir(dir);
    let mut agent_args = vec![
        "--kubeconfig".to_string(),
        admin_kubeconfig.display().to_string(),
        "--node-name".into(),
        node.clone(),
        "--data-dir".into(),
        agent_data.display().to_string(),
    ];
    agent_args.extend(args.node.agent_args());
    if args.port == 0 {
        // A throwaway cluster on a free port: the agent's stream API
        // takes a free port too (it is published on the Node).
        agent_args.extend(["--port".to_string(), "0".into()]);
    }
    let child = AGENT.spawn(dir, &agent_args)?;
    let kc = kube::config::Kubeconfig::read_from(admin_kubeconfig)?;
    let client = kube::Client::try_from(
        kube::Config::from_custom_kubeconfig(kc, &Default::default()).await?,
    )?;
    wait_for_node(child, dir, client, &node, timeout).await
}

/// Waits until the agent `child` (started in `dir`) has registered Node
/// `node`; fails with the end of its log if it exits first.
pub(super) async fn wait_for_node(
    mut child: std::process::Child,
    dir: &Path,
    client: kube::Client,
    node: &str,
    timeout: Duration,
) -> Result<()> {
    let nodes: kube::Api<k8s_openapi::api::core::v1::Node> = kube::Api::all(client);
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Some(status) = child.try_wait()? {
            let _ = std::fs::remove_file(AGENT.pid_file(dir));
            bail!(
                "bosun-agent exited ({status}) before registering node {node}; last lines of {}:\n{}",
                AGENT.log_file(dir).display(),
                tail(&AGENT.log_file(dir), 20)
            );
        }
        if nodes.get_opt(node).await.ok().flatten().is_some() {
            return Ok(());
        }
        if tokio::time::Instant::now() >= deadline {
            bail!(
                "bosun-agent did not register node {node} in time; see {}",
                AGENT.log_file(dir).display()
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Stops a component with SIGTERM and waits for it; false if it was not running.
fn stop(
    component: &Component,
    dir: &Path,
    args: &DownArgs,
    timeout: Duration,
) -> Result<Option<i32>> {
    let Some(pid) = component.running_pid(dir) else {
        let _ = std::fs::remove_file(component.pid_file(dir));
        return Ok(None);
    };
    kill(Pid::from_raw(pid), Signal::SIGTERM)
        .with_context(|| format!("signalling {} (pid {pid})", component.binary))?;
    let deadline = std::time::Instant::now() + timeout;
    while is_alive(pid) {
        if std::time::Instant::now() >= deadline {
            bail!(
                "{} (pid {pid}) did not exit within {} of SIGTERM; see {}",
                component.binary,
                args.timeout,
                component.log_file(dir).display()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = std::fs::remove_file(component.pid_file(dir));
    Ok(Some(pid))
}

/// The agent's data dir: beside the control plane's, or inside the data
/// dir of `bosun join` (which holds the node's kubeconfig).
pub(super) fn agent_data_dir(dir: &Path) -> PathBuf {
    if dir.join(purge::NODE_KUBECONFIG).exists() {
        return dir.join("agent");
    }
    dir.parent().unwrap_or(dir).join("agent")
}

pub fn down(args: &DownArgs) -> Result<bool> {
    let dir = args.data_dir.clone().unwrap_or_else(default_data_dir);
    let timeout = parse_duration(&args.timeout)?;
    if args.purge {
        let plan = purge::Plan::read(&dir, &agent_data_dir(&dir));
        purge::confirm(&plan, args.yes)?;
        stop_all(args, &dir, timeout)?;
        purge::purge(&plan, || AGENT.find_binary())?;
        println!("bosun is purged from this host.");
        return Ok(true);
    }
    stop_all(args, &dir, timeout)
}

/// Stops the agent, then the control plane (reverse start order).
fn stop_all(args: &DownArgs, dir: &Path, timeout: Duration) -> Result<bool> {
    let dir = dir.to_path_buf();
    // Stop in reverse start order: the agent before the control plane.
    if let Some(pid) = stop(&AGENT, &dir, args, timeout)? {
        println!(
            "bosun {} stopped (pid {pid}); pods' containers keep running and are adopted by the next `bosun up`.",
            AGENT.title
        );
    }
    let Some(pid) = stop(&CONTROL, &dir, args, timeout)? else {
        println!(
            "bosun is not running (no live {} in {}).",
            CONTROL.binary,
            pretty(&dir)
        );
        return Ok(true);
    };
    let _ = std::fs::remove_file(dir.join("address"));
    println!(
        "bosun {} stopped (pid {pid}); data kept in {}.",
        CONTROL.title,
        pretty(&dir)
    );
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Flags {
        #[command(flatten)]
        node: NodeArgs,
    }

    #[test]
    fn node_flags_become_the_agents_flags() {
        let f = Flags::try_parse_from([
            "bosun",
            "--node-interface",
            "eth1",
            "--pod-cidr",
            "10.244.5.0/24",
        ])
        .unwrap();
        assert_eq!(
            f.node.agent_args(),
            ["--node-interface", "eth1", "--pod-cidr", "10.244.5.0/24"]
        );
        let f = Flags::try_parse_from(["bosun", "--node-ip", "192.168.56.11"]).unwrap();
        assert_eq!(f.node.agent_args(), ["--node-ip", "192.168.56.11"]);
        assert!(Flags::try_parse_from(["bosun"])
            .unwrap()
            .node
            .agent_args()
            .is_empty());
        // An address and an interface at once, or an address that is none,
        // is refused naming the flag.
        let both =
            Flags::try_parse_from(["bosun", "--node-ip", "10.0.0.1", "--node-interface", "eth1"]);
        assert!(both.is_err_and(|e| e.to_string().contains("--node-interface")));
        let bad = Flags::try_parse_from(["bosun", "--node-ip", "eth1"]);
        assert!(bad.is_err_and(|e| e.to_string().contains("--node-ip")));
    }

    #[test]
    fn kubeconfig_is_written_and_updated_in_place() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kc");
        std::fs::write(
            &path,
            "apiVersion: v1\nkind: Config\nclusters:\n- name: other\n  cluster:\n    server: https://x\n",
        )
        .unwrap();
        let cluster = |server: &str| {
            serde_yaml::from_str::<serde_yaml::Value>(&format!(
                "server: {server}\ncertificate-authority-data: Q0E=\n"
            ))
            .unwrap()
        };
        write_kubeconfig(&path, &cluster("https://127.0.0.1:1"), "t1").unwrap();
        write_kubeconfig(&path, &cluster("https://127.0.0.1:2"), "t2").unwrap();
        let kc = kube::config::Kubeconfig::read_from(&path).unwrap();
        assert_eq!(kc.current_context.as_deref(), Some("bosun"));
        assert_eq!(kc.clusters.len(), 2);
        let bosun = kc.clusters.iter().find(|c| c.name == "bosun").unwrap();
        assert_eq!(
            bosun.cluster.as_ref().unwrap().server.as_deref(),
            Some("https://127.0.0.1:2")
        );
        assert_eq!(
            bosun
                .cluster
                .as_ref()
                .unwrap()
                .certificate_authority_data
                .as_deref(),
            Some("Q0E=")
        );
        assert_eq!(kc.auth_infos.len(), 1);
        let ctx = kc.contexts[0].context.as_ref().unwrap();
        assert_eq!(ctx.namespace.as_deref(), Some("default"));
    }
}

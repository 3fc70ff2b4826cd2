//! The `bosun` command line: kubectl's verbs against a bosun control plane.

mod apply;
mod autoscale;
mod certs;
mod client;
mod clusters;
mod component;
mod create;
mod create_data;
mod delete;
mod describe;
mod discovered;
mod drain;
mod errors;
mod failover;
mod get;
mod info;
mod join;
mod leave;
mod manifest;
mod modify;
mod nodes;
mod output;
mod port_forward;
mod purge;
mod record;
mod replica_sets;
mod rollout;
mod scale;
mod set;
mod snapshot;
mod streams;
mod supervise;
mod systemd;
mod table;
mod targets;
mod token;
mod top;
mod up;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

use client::{ConnectOptions, Ctx};

#[derive(Debug, Parser)]
#[command(
    name = "bosun",
    version,
    about = "bosun controls a bosun cluster, with kubectl's verbs",
    disable_help_subcommand = true
)]
pub struct Cli {
    /// Path to the kubeconfig file (default: $KUBECONFIG, ~/.bosun/kubeconfig, ~/.kube/config).
    #[arg(long, global = true, value_name = "PATH")]
    kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use.
    #[arg(long, global = true)]
    context: Option<String>,
    /// The namespace for this request.
    #[arg(short = 'n', long, global = true)]
    namespace: Option<String>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Start a local control plane in the background and write a kubeconfig for it.
    Up(up::UpArgs),
    /// Stop the local control plane started by `bosun up` (its data is kept).
    Down(up::DownArgs),
    /// Make this host a node of a cluster, with a bootstrap token.
    Join(join::JoinArgs),
    /// Take this host's node out of the cluster and remove bosun from the host.
    Leave(leave::LeaveArgs),
    /// List the bosun clusters on this host (`bosun up --name`).
    List,
    /// Keep one of bosun's processes running and its log rotated (`bosun
    /// up` and `bosun join` start it).
    #[command(hide = true)]
    Supervise(supervise::SuperviseArgs),
    /// Create, list and delete the bootstrap tokens hosts join with.
    Token(token::TokenArgs),
    /// Save a snapshot of the running control plane's store and keys, or restore one.
    Snapshot(snapshot::SnapshotArgs),
    /// Apply a configuration to resources from a file, a directory or stdin.
    Apply(apply::ApplyArgs),
    /// Create resources from a file, a directory or stdin.
    Create(create::CreateArgs),
    /// Delete resources by file, by type and name, by label selector, or all of a type.
    Delete(delete::DeleteArgs),
    /// Display one or many resources.
    Get(get::GetArgs),
    /// Show details of a resource.
    Describe(describe::DescribeArgs),
    /// Update the labels on a resource.
    Label(modify::LabelArgs),
    /// Update the annotations on a resource.
    Annotate(modify::LabelArgs),
    /// Update fields of a resource with a strategic merge, merge or JSON patch.
    Patch(modify::PatchArgs),
    /// Set a new size for a deployment, replica set or stateful set.
    Scale(scale::ScaleArgs),
    /// Auto-scale a deployment, replica set or stateful set.
    Autoscale(autoscale::AutoscaleArgs),
    /// Display resource (CPU/memory) usage of nodes or pods.
    Top(top::TopArgs),
    /// Set specific features on objects: `set image`.
    Set(set::SetArgs),
    /// Manage the rollout of a deployment: status, history, undo, pause, resume, restart.
    Rollout(rollout::RolloutArgs),
    /// Print the logs for a container in a pod.
    Logs(streams::LogsArgs),
    /// Execute a command in a container.
    Exec(streams::ExecArgs),
    /// Attach to a process that is already running inside a container.
    Attach(streams::AttachArgs),
    /// Forward one or more local ports to a pod.
    PortForward(port_forward::PortForwardArgs),
    /// Mark a node as unschedulable.
    Cordon(nodes::CordonArgs),
    /// Mark a node as schedulable.
    Uncordon(nodes::CordonArgs),
    /// Drain a node in preparation for maintenance.
    Drain(drain::DrainArgs),
    /// Update the taints on one or more nodes.
    Taint(nodes::TaintArgs),
    /// Print the client and server version.
    Version,
    /// Print the resource types the server serves.
    ApiResources,
}

impl Cli {
    fn connect_options(&self) -> ConnectOptions {
        ConnectOptions {
            kubeconfig: self.kubeconfig.clone(),
            context: self.context.clone(),
            namespace: self.namespace.clone(),
        }
    }
}

/// What a command ended with: `Ok(false)` when it printed its own errors
/// and should exit 1 (kubectl goes on after a failed object and fails at the end).
type Outcome = anyhow::Result<bool>;

async fn dispatch(cli: Cli) -> Outcome {
    let opts = cli.connect_options();
    match cli.command {
        Command::Up(args) => up::up(&args, opts.kubeconfig.as_deref()).await,
        Command::Down(args) => up::down(&args),
        Command::Join(args) => join::join(&args).await,
        Command::Leave(args) => leave::leave(&args).await,
        Command::List => up::list(),
        Command::Supervise(args) => supervise::supervise(&args).await,
        Command::Snapshot(args) => snapshot::snapshot(&args, &opts).await,
        command => {
            let ctx = Ctx::connect(&opts).await?;
            let explicit_ns = opts.namespace.is_some();
            match command {
                Command::Apply(args) => apply::apply(&ctx, &args, explicit_ns).await,
                Command::Create(args) => create::create(&ctx, &args, explicit_ns).await,
                Command::Delete(args) => delete::delete(&ctx, &args).await,
                Command::Get(args) => get::get(&ctx, &args).await,
                Command::Describe(args) => describe::describe(&ctx, &args).await,
                Command::Label(args) => modify::label(&ctx, &args, modify::Field::Labels).await,
                Command::Annotate(args) => {
                    modify::label(&ctx, &args, modify::Field::Annotations).await
                }
                Command::Patch(args) => modify::patch(&ctx, &args).await,
                Command::Scale(args) => scale::scale(&ctx, &args).await,
                Command::Set(args) => set::set(&ctx, &args).await,
                Command::Autoscale(args) => autoscale::autoscale(&ctx, &args).await,
                Command::Top(args) => top::top(&ctx, &args).await,
                Command::Rollout(args) => rollout::rollout(&ctx, &args).await,
                Command::Logs(args) => streams::logs(&ctx, &args).await,
                Command::Exec(args) => streams::exec(&ctx, &args).await,
                Command::Attach(args) => streams::attach(&ctx, &args).await,
                Command::PortForward(args) => port_forward::port_forward(&ctx, &args).await,
                Command::Cordon(args) => nodes::cordon(&ctx, &args, true).await,
                Command::Uncordon(args) => nodes::cordon(&ctx, &args, false).await,
                Command::Drain(args) => drain::drain(&ctx, &args).await,
                Command::Taint(args) => nodes::taint(&ctx, &args).await,
                Command::Token(args) => token::token(&ctx, &args).await,
                Command::Version => info::version(&ctx).await,
                Command::ApiResources => info::api_resources(&ctx).await,
                Command::Up(_)
                | Command::Down(_)
                | Command::Join(_)
                | Command::Leave(_)
                | Command::List
                | Command::Supervise(_)
                | Command::Snapshot(_) => {
                    unreachable!("handled above")
                }
            }
        }
    }
}

/// Ends the command with this exit code and no further message (`exec`
/// passes on the remote command's, as kubectl does).
#[derive(Debug)]
pub struct ExitStatus(pub i32);

impl std::fmt::Display for ExitStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "exit code {}", self.0)
    }
}

impl std::error::Error for ExitStatus {}

/// `bosun get pods | head -1` must end quietly, as kubectl does, not with a
/// panic about a broken pipe.
fn quiet_on_closed_stdout() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let message = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or("");
        if message.contains("failed printing to stdout") {
            std::process::exit(141);
        }
        default(info);
    }));
}

/// Parses the command line, runs the command, prints a failure as kubectl would.
pub fn main() -> ExitCode {
    quiet_on_closed_stdout();
    let command = Cli::command();
    let matches = command.clone().get_matches();
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    record::remember(&command, &matches);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: starting the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let outcome = runtime.block_on(dispatch(cli));
    // A read of stdin may still be blocked in a thread; do not wait for it.
    runtime.shutdown_background();
    match outcome {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) if e.downcast_ref::<ExitStatus>().is_some() => {
            let code = e.downcast_ref::<ExitStatus>().map_or(1, |s| s.0);
            ExitCode::from(u8::try_from(code).unwrap_or(1))
        }
        Err(e) => {
            eprintln!("{}", errors::render(&e));
            ExitCode::FAILURE
        }
    }
}

/// What the CLI's unit tests share.
#[cfg(test)]
mod test_args {
    /// Command-line arguments from string literals.
    pub fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }
}

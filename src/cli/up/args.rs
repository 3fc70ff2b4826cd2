//! The argument groups `bosun up` and `bosun join` share: how their
//! processes run ([`ProcessArgs`]) and what the agent they start is told
//! about its node ([`NodeArgs`]).

use anyhow::Result;
use clap::Args;

use super::super::component::{self, Launch, LogLimits, ServiceManager};

/// How `bosun up` and `bosun join` run their processes: who restarts
/// them, and how big each log may grow under bosun's own supervisor.
#[derive(Debug, Args)]
pub(in crate::cli) struct ProcessArgs {
    /// Who keeps the processes running: systemd units (restarted by
    /// systemd, started at boot, logs in the journal), bosun's own
    /// supervisor, or `auto`: systemd where it is the host's service
    /// manager and bosun runs as root.
    #[arg(
        long,
        value_enum,
        default_value = "auto",
        env = "BOSUN_SERVICE_MANAGER"
    )]
    service_manager: ServiceManager,
    /// Size at which a log file is rotated (e.g. 10Mi, 512Ki).
    #[arg(long, default_value = "10Mi", value_parser = component::parse_size)]
    log_max_size: u64,
    /// How many files of each log are kept, the live one included.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u16).range(1..))]
    log_max_files: u16,
}

impl ProcessArgs {
    /// Refuses a --service-manager that cannot be used here.
    pub fn check(&self) -> Result<()> {
        self.service_manager.systemd().map(drop)
    }

    pub fn limits(&self) -> LogLimits {
        LogLimits {
            max_bytes: self.log_max_size,
            files: self.log_max_files.into(),
        }
    }

    /// How to run `component` with `args`; `unit` is its systemd unit's
    /// name, used if systemd runs it.
    pub fn launch<'a>(
        &self,
        args: &'a [String],
        unit: String,
        description: String,
        after: Vec<String>,
    ) -> Result<Launch<'a>> {
        Ok(Launch {
            args,
            log: self.limits(),
            unit: self.service_manager.systemd()?.then_some(unit),
            description,
            after,
        })
    }
}

/// What `bosun up` and `bosun join` both tell the agent they start about
/// its node.
#[derive(Debug, Args)]
pub(in crate::cli) struct NodeArgs {
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

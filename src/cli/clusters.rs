//! The bosun clusters of this host, as kind keeps its clusters: each
//! `bosun up` records its cluster in its data dir (`cluster.json`: name,
//! port, cluster and service ranges, node) and in a registry shared by
//! every cluster on the host, so that a second cluster takes ranges and
//! ports no other one holds, and `bosun list` / `bosun down --name` find
//! them.
//!
//! The registry is a folder of small JSON files, one per cluster (named
//! after a hash of its data dir), written while holding the folder's lock
//! so that two `bosun up`s started at once cannot pick the same ranges.
//! An entry whose data dir is gone is dropped when read.

use std::fs::File;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context as _, Result};
use bosun::hostnet::{self, HostRoute};
use ipnet::Ipv4Net;
use serde::{Deserialize, Serialize};

use super::client::home_dir;

/// The name of the cluster `bosun up` makes when none is given.
pub const DEFAULT_NAME: &str = "bosun";

/// In the control plane's data dir: what `bosun up` chose for the cluster.
pub const RECORD_FILE: &str = "cluster.json";

/// A cluster as `bosun up` made it; kept across restarts so that it comes
/// back with the same port and ranges.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterRecord {
    pub name: String,
    pub data_dir: PathBuf,
    pub port: u16,
    #[serde(rename = "clusterCIDR")]
    pub cluster_cidr: Ipv4Net,
    #[serde(rename = "serviceCIDR")]
    pub service_cidr: Ipv4Net,
    /// The local node, if `bosun up` started an agent.
    #[serde(default)]
    pub node: Option<String>,
}

impl ClusterRecord {
    /// The kubeconfig names (cluster, user, context) of this cluster:
    /// `bosun`/`bosun-admin`/`bosun` for the default one, `bosun-NAME`...
    /// for a named one, as kind names its contexts `kind-NAME`.
    pub fn kubeconfig_names(&self) -> KubeconfigNames {
        KubeconfigNames::of(&self.name)
    }

    pub fn read(data_dir: &Path) -> Result<Option<ClusterRecord>> {
        let path = data_dir.join(RECORD_FILE);
        match std::fs::read_to_string(&path) {
            Ok(text) => Ok(Some(
                serde_json::from_str(&text)
                    .with_context(|| format!("reading {}", path.display()))?,
            )),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
        }
    }

    fn write(&self) -> Result<()> {
        let text = serde_json::to_string_pretty(self)? + "\n";
        bosun::files::write_atomically(&self.data_dir.join(RECORD_FILE), &text, 0o644)?;
        Ok(())
    }
}

/// The names a cluster's entries carry in a kubeconfig.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KubeconfigNames {
    pub cluster: String,
    pub user: String,
    pub context: String,
}

impl KubeconfigNames {
    pub fn of(name: &str) -> KubeconfigNames {
        let base = if name == DEFAULT_NAME {
            DEFAULT_NAME.to_string()
        } else {
            format!("bosun-{name}")
        };
        KubeconfigNames {
            cluster: base.clone(),
            user: format!("{base}-admin"),
            context: base,
        }
    }
}

/// Checks a cluster name: a DNS label, as it also names the node.
pub fn validate_name(name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 63
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !name.starts_with('-')
        && !name.ends_with('-');
    if !ok {
        bail!(
            "--name {name:?}: must be a DNS label (lower-case letters, digits and '-', \
             starting and ending with a letter or digit, at most 63 characters)"
        );
    }
    Ok(())
}

/// `~/.bosun/clusters/NAME/control` for a named cluster; the default
/// cluster keeps `~/.bosun/control`.
pub fn default_data_dir(name: Option<&str>) -> PathBuf {
    match name {
        Some(n) if n != DEFAULT_NAME => home_dir()
            .join(".bosun")
            .join("clusters")
            .join(n)
            .join("control"),
        _ => home_dir().join(".bosun").join("control"),
    }
}

/// The host-wide registry: `$BOSUN_CLUSTERS_DIR`, else
/// `/var/lib/bosun/clusters` for root (every user's clusters share the
/// host's addresses), else `~/.bosun/clusters.d`.
pub fn registry_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("BOSUN_CLUSTERS_DIR") {
        return PathBuf::from(d);
    }
    if nix::unistd::geteuid().is_root() {
        PathBuf::from("/var/lib/bosun/clusters")
    } else {
        home_dir().join(".bosun").join("clusters.d")
    }
}

fn entry_path(registry: &Path, data_dir: &Path) -> PathBuf {
    // A stable hash (FNV-1a) of the path: DefaultHasher may change between
    // Rust releases, and entries outlive the binary that wrote them.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in data_dir.as_os_str().as_encoded_bytes() {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    registry.join(format!("{h:016x}.json"))
}

/// The registry, locked while this value lives.
pub struct Registry {
    dir: PathBuf,
    _lock: nix::fcntl::Flock<File>,
}

impl Registry {
    pub fn lock() -> Result<Registry> {
        Registry::lock_at(&registry_dir())
    }

    pub fn lock_at(dir: &Path) -> Result<Registry> {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let path = dir.join(".lock");
        let file = File::create(&path).with_context(|| format!("opening {}", path.display()))?;
        let lock = nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusive)
            .map_err(|(_, e)| e)
            .with_context(|| format!("locking {}", path.display()))?;
        Ok(Registry {
            dir: dir.to_path_buf(),
            _lock: lock,
        })
    }

    /// Every cluster recorded on this host whose data dir still holds its
    /// record; entries of vanished data dirs are removed.
    pub fn clusters(&self) -> Vec<ClusterRecord> {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for entry in entries.flatten() {
            let path = entry.path();
            if path.extension().and_then(|e| e.to_str()) != Some("json") {
                continue;
            }
            let Some(recorded) = std::fs::read_to_string(&path)
                .ok()
                .and_then(|t| serde_json::from_str::<ClusterRecord>(&t).ok())
            else {
                continue;
            };
            match ClusterRecord::read(&recorded.data_dir) {
                Ok(Some(current)) => out.push(current),
                Ok(None) => {
                    let _ = std::fs::remove_file(&path);
                }
                Err(_) => out.push(recorded),
            }
        }
        out.sort_by(|a, b| a.name.cmp(&b.name).then(a.data_dir.cmp(&b.data_dir)));
        out
    }

    /// Records `cluster` in its data dir and here.
    pub fn register(&self, cluster: &ClusterRecord) -> Result<()> {
        cluster.write()?;
        let text = serde_json::to_string_pretty(cluster)? + "\n";
        let path = entry_path(&self.dir, &cluster.data_dir);
        bosun::files::write_atomically(&path, &text, 0o644)
            .with_context(|| format!("writing {}", path.display()))?;
        Ok(())
    }

    /// Forgets the cluster of `data_dir` (`bosun down --purge`).
    pub fn unregister(&self, data_dir: &Path) {
        let _ = std::fs::remove_file(entry_path(&self.dir, data_dir));
    }
}

/// What `bosun up` was asked for.
#[derive(Debug, Default)]
pub struct Wanted {
    pub cluster_cidr: Option<Ipv4Net>,
    pub service_cidr: Option<Ipv4Net>,
}

/// The ranges for a new cluster: those given, checked against every
/// route of the host and every other bosun cluster here, or else the
/// first candidates none of them overlaps.
pub fn choose_ranges(
    wanted: &Wanted,
    others: &[ClusterRecord],
    routes: &[HostRoute],
) -> Result<(Ipv4Net, Ipv4Net)> {
    let clash = |net: &Ipv4Net, also: &[(Ipv4Net, String)]| -> Option<String> {
        for o in others {
            for (theirs, what) in [(&o.cluster_cidr, "cluster"), (&o.service_cidr, "service")] {
                if hostnet::overlaps(net, theirs) {
                    return Some(format!(
                        "the {what} range {theirs} of bosun cluster {:?} ({})",
                        o.name,
                        o.data_dir.display()
                    ));
                }
            }
        }
        if let Some(r) = hostnet::routes_overlapping(net, routes).first() {
            return Some(format!("the host route {r}"));
        }
        also.iter()
            .find(|(n, _)| hostnet::overlaps(net, n))
            .map(|(n, what)| format!("{what} {n}"))
    };
    let mut taken: Vec<Ipv4Net> = routes
        .iter()
        .filter(|r| r.net.prefix_len() > 0)
        .map(|r| r.net)
        .collect();
    for o in others {
        taken.extend([o.cluster_cidr, o.service_cidr]);
    }
    let pick = |given: Option<Ipv4Net>,
                flag: &str,
                candidates: Vec<Ipv4Net>,
                also: &[(Ipv4Net, String)],
                taken: &[Ipv4Net]|
     -> Result<Ipv4Net> {
        match given {
            Some(net) if net.trunc() != net => bail!(
                "{flag} {net}: has host bits set; did you mean {}?",
                net.trunc()
            ),
            Some(net) => match clash(&net, also) {
                Some(what) => bail!("{flag} {net} overlaps {what}; choose another range"),
                None => Ok(net),
            },
            None => hostnet::first_free(&candidates, taken).ok_or_else(|| {
                anyhow::anyhow!("no free range for {flag} on this host; give one with {flag}")
            }),
        }
    };
    let cluster = pick(
        wanted.cluster_cidr,
        "--cluster-cidr",
        hostnet::cluster_cidr_candidates(),
        &[],
        &taken,
    )?;
    taken.push(cluster);
    let service = pick(
        wanted.service_cidr,
        "--service-cidr",
        hostnet::service_cidr_candidates(),
        &[(cluster, "this cluster's --cluster-cidr".to_string())],
        &taken,
    )?;
    Ok((cluster, service))
}

/// The data dir of the cluster named `name` on this host.
pub fn data_dir_of(name: &str) -> Result<PathBuf> {
    let clusters = Registry::lock()?.clusters();
    let found: Vec<_> = clusters.iter().filter(|c| c.name == name).collect();
    match found.as_slice() {
        [one] => Ok(one.data_dir.clone()),
        [] => {
            // Never started, or its registry entry is gone: its default dir.
            let dir = default_data_dir(Some(name));
            if dir.join(RECORD_FILE).exists() {
                return Ok(dir);
            }
            let known: Vec<&str> = clusters.iter().map(|c| c.name.as_str()).collect();
            bail!(
                "no bosun cluster named {name:?} on this host (known: {})",
                if known.is_empty() {
                    "none".to_string()
                } else {
                    known.join(", ")
                }
            )
        }
        many => bail!(
            "several bosun clusters are named {name:?}: {}; say which with --data-dir",
            many.iter()
                .map(|c| c.data_dir.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn net(s: &str) -> Ipv4Net {
        s.parse().unwrap()
    }

    fn record(name: &str, cluster: &str, service: &str) -> ClusterRecord {
        ClusterRecord {
            name: name.into(),
            data_dir: PathBuf::from(format!("/tmp/{name}")),
            port: 6443,
            cluster_cidr: net(cluster),
            service_cidr: net(service),
            node: None,
        }
    }

    fn route(n: &str, dev: &str) -> HostRoute {
        HostRoute {
            net: net(n),
            dev: dev.into(),
            gateway: None,
        }
    }

    #[test]
    fn a_second_cluster_takes_the_next_free_ranges() {
        let routes = [
            route("0.0.0.0/0", "eth0"),
            route("172.17.0.0/16", "docker0"),
        ];
        let (c, s) = choose_ranges(&Wanted::default(), &[], &routes).unwrap();
        assert_eq!((c, s), (net("10.244.0.0/16"), net("10.96.0.0/12")));
        let a = record("a", "10.244.0.0/16", "10.96.0.0/12");
        // a's first node's bridge is a route too.
        let routes = [route("10.244.0.0/24", "br-1")];
        let (c, s) = choose_ranges(&Wanted::default(), &[a], &routes).unwrap();
        assert_eq!((c, s), (net("10.245.0.0/16"), net("10.112.0.0/12")));
    }

    #[test]
    fn given_ranges_that_overlap_are_refused_naming_the_overlap() {
        let a = record("a", "10.244.0.0/16", "10.96.0.0/12");
        let err = choose_ranges(
            &Wanted {
                cluster_cidr: Some(net("10.244.8.0/21")),
                service_cidr: None,
            },
            std::slice::from_ref(&a),
            &[],
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("--cluster-cidr 10.244.8.0/21 overlaps the cluster range 10.244.0.0/16 of bosun cluster \"a\""),
            "{err}"
        );
        let err = choose_ranges(
            &Wanted {
                cluster_cidr: Some(net("10.50.0.0/16")),
                service_cidr: Some(net("10.100.0.0/16")),
            },
            std::slice::from_ref(&a),
            &[],
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("--service-cidr 10.100.0.0/16 overlaps the service range 10.96.0.0/12"),
            "{err}"
        );
        let err = choose_ranges(
            &Wanted {
                cluster_cidr: Some(net("172.17.5.0/24")),
                service_cidr: None,
            },
            &[],
            &[route("172.17.0.0/16", "docker0")],
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("overlaps the host route 172.17.0.0/16 dev docker0"),
            "{err}"
        );
        let err = choose_ranges(
            &Wanted {
                cluster_cidr: Some(net("10.60.0.0/16")),
                service_cidr: Some(net("10.60.128.0/20")),
            },
            &[],
            &[],
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("overlaps this cluster's --cluster-cidr 10.60.0.0/16"),
            "{err}"
        );
        let err = choose_ranges(
            &Wanted {
                cluster_cidr: Some(net("10.61.3.0/16")),
                service_cidr: None,
            },
            &[],
            &[],
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains(
                "--cluster-cidr 10.61.3.0/16: has host bits set; did you mean 10.61.0.0/16?"
            ),
            "{err}"
        );
    }

    #[test]
    fn the_registry_keeps_clusters_whose_data_dir_holds_their_record() {
        let tmp = tempfile::tempdir().unwrap();
        let reg = Registry::lock_at(&tmp.path().join("registry")).unwrap();
        let mut a = record("a", "10.244.0.0/16", "10.96.0.0/12");
        a.data_dir = tmp.path().join("a");
        std::fs::create_dir_all(&a.data_dir).unwrap();
        reg.register(&a).unwrap();
        let mut b = record("b", "10.245.0.0/16", "10.112.0.0/12");
        b.data_dir = tmp.path().join("b");
        std::fs::create_dir_all(&b.data_dir).unwrap();
        reg.register(&b).unwrap();
        assert_eq!(reg.clusters(), [a.clone(), b.clone()]);
        // b's data dir removed (a test's temp dir, a purge by hand).
        std::fs::remove_dir_all(&b.data_dir).unwrap();
        assert_eq!(reg.clusters(), [a.clone()]);
        assert_eq!(
            std::fs::read_dir(tmp.path().join("registry"))
                .unwrap()
                .count(),
            2
        ); // a + .lock
        reg.unregister(&a.data_dir);
        assert!(reg.clusters().is_empty());
    }

    #[test]
    fn names_are_dns_labels_and_name_their_kubeconfig_entries() {
        validate_name("ci-1").unwrap();
        for bad in ["", "A", "-a", "a-", "a_b", &"x".repeat(64)] {
            assert!(validate_name(bad)
                .unwrap_err()
                .to_string()
                .contains("--name"));
        }
        assert_eq!(KubeconfigNames::of("bosun").context, "bosun");
        assert_eq!(KubeconfigNames::of("bosun").user, "bosun-admin");
        assert_eq!(KubeconfigNames::of("a").context, "bosun-a");
        assert_eq!(KubeconfigNames::of("a").user, "bosun-a-admin");
    }
}

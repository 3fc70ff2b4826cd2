//! One reading of a container's CPU and memory from Docker's stats
//! endpoint, asked for once (`stream=false`, `one-shot=true`: Docker
//! answers at once instead of waiting a second for a second reading, and
//! holds no stream open). The rate of CPU use is the caller's business: it
//! divides the difference of two readings by the time between them.

use std::collections::HashMap;

use bollard::query_parameters::StatsOptions;
use futures::StreamExt;

use super::errors::not_found_or;
use super::DockerRuntime;
use crate::runtime::{ContainerUsage, Result, RuntimeError};

impl DockerRuntime {
    pub(super) async fn usage(&self, id: &str) -> Result<ContainerUsage> {
        let docker = self.client().await?;
        let options = StatsOptions {
            stream: false,
            one_shot: true,
        };
        let mut stream = std::pin::pin!(docker.stats(id, Some(options)));
        let stats = match stream.next().await {
            Some(Ok(s)) => s,
            Some(Err(e)) => return Err(not_found_or(e, id)),
            None => return Err(RuntimeError::NotFound(id.to_string())),
        };
        let cpu = stats
            .cpu_stats
            .as_ref()
            .and_then(|c| c.cpu_usage.as_ref())
            .and_then(|u| u.total_usage)
            .unwrap_or(0);
        let memory = stats
            .memory_stats
            .as_ref()
            .map(|m| working_set(m.usage.unwrap_or(0), m.stats.as_ref()))
            .unwrap_or(0);
        Ok(ContainerUsage {
            cpu_usage_nanos: cpu,
            memory_working_set_bytes: memory,
        })
    }
}

/// Usage minus the inactive file cache, as `docker stats` and the
/// kubelet's working set compute it: `total_inactive_file` on cgroup v1,
/// `inactive_file` on cgroup v2.
pub(crate) fn working_set(usage: u64, stats: Option<&HashMap<String, u64>>) -> u64 {
    let inactive = stats
        .and_then(|s| {
            s.get("total_inactive_file")
                .or_else(|| s.get("inactive_file"))
        })
        .copied()
        .unwrap_or(0);
    if inactive < usage {
        usage - inactive
    } else {
        usage
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn working_set_drops_inactive_file_cache() {
        let v1 = HashMap::from([("total_inactive_file".to_string(), 300)]);
        assert_eq!(working_set(1000, Some(&v1)), 700);
        let v2 = HashMap::from([("inactive_file".to_string(), 100)]);
        assert_eq!(working_set(1000, Some(&v2)), 900);
        // A cache larger than the usage (a race in the kernel's counters) is ignored.
        assert_eq!(working_set(50, Some(&v2)), 50);
        assert_eq!(working_set(50, None), 50);
    }
}

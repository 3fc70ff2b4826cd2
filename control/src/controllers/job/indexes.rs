//! Indexed completion mode: each index in `[0, completions)` must succeed
//! once. A pod carries its index in the annotation (and label)
//! `batch.kubernetes.io/job-completion-index`, in the env var
//! `JOB_COMPLETION_INDEX` (from that annotation), in its name
//! `<job>-<index>-<random>` and its hostname `<job>-<index>`.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::{EnvVar, EnvVarSource, ObjectFieldSelector, Pod};

pub const INDEX_KEY: &str = "batch.kubernetes.io/job-completion-index";
pub const INDEX_ENV: &str = "JOB_COMPLETION_INDEX";

/// The pod's completion index, when it has a valid one below `completions`.
pub fn index_of(pod: &Pod, completions: i32) -> Option<i32> {
    let value = pod.metadata.annotations.as_ref()?.get(INDEX_KEY)?;
    let index: i32 = value.parse().ok()?;
    (0..completions).contains(&index).then_some(index)
}

/// Turns a pod from the template into the pod for `index`.
pub fn set_index(pod: &mut Pod, job_name: &str, index: i32) {
    let md = &mut pod.metadata;
    md.generate_name = Some(format!("{job_name}-{index}-"));
    md.annotations
        .get_or_insert_with(Default::default)
        .insert(INDEX_KEY.into(), index.to_string());
    md.labels
        .get_or_insert_with(Default::default)
        .insert(INDEX_KEY.into(), index.to_string());
    let Some(spec) = pod.spec.as_mut() else {
        return;
    };
    if spec.hostname.is_none() {
        spec.hostname = Some(format!("{job_name}-{index}"));
    }
    let env = EnvVar {
        name: INDEX_ENV.into(),
        value: None,
        value_from: Some(EnvVarSource {
            field_ref: Some(ObjectFieldSelector {
                field_path: format!("metadata.annotations['{INDEX_KEY}']"),
                api_version: None,
            }),
            ..Default::default()
        }),
    };
    let containers = spec
        .containers
        .iter_mut()
        .chain(spec.init_containers.iter_mut().flatten());
    for c in containers {
        let vars = c.env.get_or_insert_with(Vec::new);
        if !vars.iter().any(|v| v.name == INDEX_ENV) {
            vars.push(env.clone());
        }
    }
}

/// The indexes in `[0, completions)` neither succeeded nor being run,
/// lowest first, at most `n`.
pub fn pending(
    completions: i32,
    succeeded: &BTreeSet<i32>,
    active: &BTreeSet<i32>,
    n: usize,
) -> Vec<i32> {
    (0..completions)
        .filter(|i| !succeeded.contains(i) && !active.contains(i))
        .take(n)
        .collect()
}

/// `status.completedIndexes`: sorted ranges, `1,3-5,7`.
pub fn format_ranges(indexes: &BTreeSet<i32>) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut iter = indexes.iter().copied().peekable();
    while let Some(first) = iter.next() {
        let mut last = first;
        while iter.peek() == Some(&(last + 1)) {
            last = iter.next().unwrap_or(last);
        }
        out.push(if first == last {
            first.to_string()
        } else {
            format!("{first}-{last}")
        });
    }
    out.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn completed_indexes_are_ranges() {
        let set: BTreeSet<i32> = [0, 1, 2, 4, 6, 7].into_iter().collect();
        assert_eq!(format_ranges(&set), "0-2,4,6-7");
        assert_eq!(format_ranges(&BTreeSet::new()), "");
        let active: BTreeSet<i32> = [1].into_iter().collect();
        let done: BTreeSet<i32> = [0, 3].into_iter().collect();
        assert_eq!(pending(6, &done, &active, 2), vec![2, 4]);
    }
}

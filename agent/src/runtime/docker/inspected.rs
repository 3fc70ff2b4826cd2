//! What Docker's inspect said of each container, kept while the
//! container's state stays the same: the relist and every pod worker list
//! the node's containers every few seconds, and inspecting all of them
//! each time (Docker's full `HostConfig` and all, parsed) cost the agent
//! most of its idle CPU. As the kubelet's relist, a list is cheap (one
//! summary per container) and only the containers whose state changed are
//! inspected again.
//!
//! Only `running` and `exited` containers are kept: what inspect says of
//! them does not change until their state does (bosun never starts an
//! exited container again; a restart is a new container). A `created`
//! container is read afresh each time, since a failed start leaves it
//! `created` with Docker's error, which only inspect shows.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

use bollard::models::ContainerSummaryStateEnum;

use crate::runtime::ContainerInfo;

#[derive(Debug, Default)]
pub(super) struct Inspected {
    by_id: Mutex<HashMap<String, (ContainerSummaryStateEnum, ContainerInfo)>>,
}

impl Inspected {
    /// The container's info as last inspected, if it was inspected in the
    /// `state` the list now shows.
    pub(super) fn get(
        &self,
        id: &str,
        state: Option<ContainerSummaryStateEnum>,
    ) -> Option<ContainerInfo> {
        let state = state.filter(|s| keeps(*s))?;
        let by_id = self.by_id.lock().unwrap();
        by_id
            .get(id)
            .filter(|(seen, _)| *seen == state)
            .map(|(_, info)| info.clone())
    }

    /// Keeps what inspect said of a container the list showed in `state`.
    pub(super) fn put(&self, state: Option<ContainerSummaryStateEnum>, info: &ContainerInfo) {
        let mut by_id = self.by_id.lock().unwrap();
        match state.filter(|s| keeps(*s)) {
            Some(state) => {
                by_id.insert(info.id.clone(), (state, info.clone()));
            }
            None => {
                by_id.remove(&info.id);
            }
        }
    }

    /// Forgets the containers a list of the whole node no longer shows.
    pub(super) fn keep_only(&self, listed: &HashSet<&str>) {
        self.by_id
            .lock()
            .unwrap()
            .retain(|id, _| listed.contains(id.as_str()));
    }

    /// Forgets a container (removed).
    pub(super) fn forget(&self, id: &str) {
        self.by_id.lock().unwrap().remove(id);
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.by_id.lock().unwrap().len()
    }
}

fn keeps(state: ContainerSummaryStateEnum) -> bool {
    matches!(
        state,
        ContainerSummaryStateEnum::RUNNING | ContainerSummaryStateEnum::EXITED
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::{ContainerState, PodRef, Role};

    fn info(id: &str, state: ContainerState) -> ContainerInfo {
        ContainerInfo {
            id: id.into(),
            pod: PodRef {
                namespace: "default".into(),
                name: "p".into(),
                uid: "u".into(),
            },
            role: Role::App,
            name: "c".into(),
            state,
            exit_code: None,
            reason: None,
            created_at: None,
            started_at: None,
            finished_at: None,
            image: "i".into(),
            image_id: "sha256:i".into(),
            restart_count: 0,
            spec_hash: "h".into(),
            ip: None,
        }
    }

    #[test]
    fn a_container_is_inspected_again_once_its_state_changes() {
        use ContainerSummaryStateEnum::*;
        let cache = Inspected::default();
        assert_eq!(cache.get("a", Some(RUNNING)), None);
        cache.put(Some(RUNNING), &info("a", ContainerState::Running));
        assert_eq!(
            cache.get("a", Some(RUNNING)).map(|i| i.state),
            Some(ContainerState::Running)
        );
        // It exited: what was kept no longer holds.
        assert_eq!(cache.get("a", Some(EXITED)), None);
        cache.put(Some(EXITED), &info("a", ContainerState::Exited));
        assert_eq!(
            cache.get("a", Some(EXITED)).map(|i| i.state),
            Some(ContainerState::Exited)
        );
    }

    #[test]
    fn created_containers_are_never_kept() {
        use ContainerSummaryStateEnum::*;
        let cache = Inspected::default();
        cache.put(Some(CREATED), &info("a", ContainerState::Created));
        assert_eq!(cache.get("a", Some(CREATED)), None);
        assert_eq!(cache.len(), 0);
        // Nor is a container whose state the list did not give.
        cache.put(None, &info("b", ContainerState::Running));
        assert_eq!(cache.get("b", None), None);
    }

    #[test]
    fn containers_gone_from_the_node_are_forgotten() {
        use ContainerSummaryStateEnum::*;
        let cache = Inspected::default();
        cache.put(Some(RUNNING), &info("a", ContainerState::Running));
        cache.put(Some(RUNNING), &info("b", ContainerState::Running));
        cache.keep_only(&HashSet::from(["b"]));
        assert_eq!(cache.get("a", Some(RUNNING)), None);
        assert!(cache.get("b", Some(RUNNING)).is_some());
        cache.forget("b");
        assert_eq!(cache.len(), 0);
    }
}

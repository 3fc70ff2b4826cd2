//! What [`Attrs`] reads from a stored object, and how much heap it holds.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::collections::BTreeMap;

use bosun::resources::ResourceInfo;
use serde_json::{json, Value};

use super::Attrs;
use crate::api::items;
use crate::store::Stored;

fn kind(name: &str) -> &'static ResourceInfo {
    bosun::resources::by_name(name).unwrap()
}

/// A Deployment's pod as the store holds it once it runs: three labels
/// and every selectable field but two set.
fn deployment_pod() -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "web-7d4b9c8f6d-x2k4p", "namespace": "default",
            "uid": "0b1c5c52-2f55-4a53-9a53-2b4c0d3e9f11", "generateName": "web-7d4b9c8f6d-",
            "creationTimestamp": "2026-12-07T22:00:00Z",
            "labels": {"app": "web", "pod-template-hash": "7d4b9c8f6d", "tier": "frontend"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                "name": "web-7d4b9c8f6d", "uid": "5f0e", "controller": true,
                "blockOwnerDeletion": true}]},
        "spec": {"containers": [{"name": "web", "image": "nginx:1.27"}],
            "nodeName": "node-12", "restartPolicy": "Always",
            "schedulerName": "default-scheduler", "serviceAccountName": "default"},
        "status": {"phase": "Running", "podIP": "10.244.3.17"}})
}

fn attrs_of(res: &ResourceInfo, obj: &Value) -> (std::sync::Arc<Stored>, usize) {
    let value = Stored::new(serde_json::to_vec(obj).unwrap());
    let (_, held) = held(|| {
        items::derived(res, &value);
    });
    (value, held)
}

#[test]
fn labels_and_fields_of_a_pod() {
    let (value, _) = attrs_of(kind("pods"), &deployment_pod());
    let attrs = &items::derived(kind("pods"), &value).attrs;
    assert_eq!(
        attrs.labels().collect::<Vec<_>>(),
        [
            ("app", "web"),
            ("pod-template-hash", "7d4b9c8f6d"),
            ("tier", "frontend")
        ]
    );
    assert_eq!(attrs.label("app"), Some("web"));
    assert_eq!(attrs.label("tier"), Some("frontend"));
    assert_eq!(attrs.label("pod-template-hash"), Some("7d4b9c8f6d"));
    for absent in ["", "ap", "apps", "a", "zzz", "web", "default"] {
        assert_eq!(attrs.label(absent), None, "{absent}");
    }
    for (path, want) in [
        ("metadata.name", "web-7d4b9c8f6d-x2k4p"),
        ("metadata.namespace", "default"),
        ("spec.nodeName", "node-12"),
        ("spec.restartPolicy", "Always"),
        ("spec.schedulerName", "default-scheduler"),
        ("spec.serviceAccountName", "default"),
        ("spec.hostNetwork", ""),
        ("status.phase", "Running"),
        ("status.podIP", "10.244.3.17"),
        ("status.nominatedNodeName", ""),
        // Not selectable for pods: "", as a missing field.
        ("spec.containers", ""),
        ("metadata.uid", ""),
        ("reason", ""),
        ("app", ""),
    ] {
        assert_eq!(attrs.field_str(path), want, "{path}");
        assert_eq!(attrs.field(path), want, "{path}");
    }
}

#[test]
fn fields_of_other_kinds_and_odd_objects() {
    let (value, _) = attrs_of(
        kind("events"),
        &json!({"metadata": {"name": "e1", "namespace": "ns"},
            "involvedObject": {"kind": "Pod", "name": "web"}, "reason": "Started",
            "source": {"component": "kubelet", "host": "n1"}, "type": "Normal"}),
    );
    let attrs = &items::derived(kind("events"), &value).attrs;
    assert_eq!(attrs.labels().count(), 0);
    assert_eq!(attrs.label("app"), None);
    assert_eq!(attrs.field_str("source"), "kubelet");
    assert_eq!(attrs.field_str("involvedObject.name"), "web");
    assert_eq!(attrs.field_str("involvedObject.uid"), "");
    assert_eq!(attrs.field_str("reason"), "Started");
    assert_eq!(attrs.field_str("spec.nodeName"), "", "a pod's field");

    // Booleans and numbers as text; labels that are not all strings are none.
    let (value, _) = attrs_of(
        kind("pods"),
        &json!({"metadata": {"name": "p\"q", "labels": {"a": "1", "b": 2}},
            "spec": {"hostNetwork": true, "nodeName": 3}}),
    );
    let attrs = &items::derived(kind("pods"), &value).attrs;
    assert_eq!(attrs.labels().count(), 0);
    assert_eq!(attrs.field_str("metadata.name"), "p\"q");
    assert_eq!(attrs.field_str("metadata.namespace"), "");
    assert_eq!(attrs.field_str("spec.hostNetwork"), "true");
    assert_eq!(attrs.field_str("spec.nodeName"), "3");

    // Escaped label keys and values, empty ones; bytes that are no object.
    let (value, _) = attrs_of(
        kind("pods"),
        &json!({"metadata": {"labels": {"k\"1": "v\n", "": "", "b": ""}}}),
    );
    let attrs = &items::derived(kind("pods"), &value).attrs;
    assert_eq!(
        attrs.labels().collect::<Vec<_>>(),
        [("", ""), ("b", ""), ("k\"1", "v\n")]
    );
    assert_eq!(attrs.label(""), Some(""));
    assert_eq!(attrs.label("k\"1"), Some("v\n"));
    let junk = Stored::new(b"[1,2]".to_vec());
    let attrs = &items::derived(kind("pods"), &junk).attrs;
    assert_eq!(*attrs, Attrs::default());
    assert_eq!(attrs.field_str("metadata.name"), "");
    assert_eq!(attrs.label("a"), None);
}

thread_local! {
    /// Heap bytes this thread allocated and did not free.
    static LIVE: Cell<isize> = const { Cell::new(0) };
}

fn count(delta: isize) {
    let _ = LIVE.try_with(|live| live.set(live.get() + delta));
}

/// The system allocator, counting per thread what it hands out, so that a
/// test can tell how much heap a value holds while other tests run on
/// other threads. It is the allocator of the whole bosun-control unit
/// test binary (only there); counting costs a thread-local add. The
/// workspace denies unsafe code; a global allocator cannot be written
/// without it, and this one only passes each call on to `System`.
struct Counting;

#[allow(unsafe_code)]
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            count(layout.size() as isize);
        }
        p
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            count(layout.size() as isize);
        }
        p
    }
    unsafe fn dealloc(&self, p: *mut u8, layout: Layout) {
        unsafe { System.dealloc(p, layout) };
        count(-(layout.size() as isize));
    }
    unsafe fn realloc(&self, p: *mut u8, layout: Layout, new: usize) -> *mut u8 {
        let q = unsafe { System.realloc(p, layout, new) };
        if !q.is_null() {
            count(new as isize - layout.size() as isize);
        }
        q
    }
}

#[global_allocator]
static COUNTING: Counting = Counting;

/// What `make` returns and the heap bytes it keeps: allocated while it
/// ran and not freed by its end (on this thread).
fn held<T>(make: impl FnOnce() -> T) -> (T, usize) {
    let before = LIVE.with(Cell::get);
    let made = make();
    let after = LIVE.with(Cell::get);
    (made, usize::try_from(after - before).unwrap())
}

/// What a Deployment's pod's [`crate::api::items::Derived`] keeps on the
/// heap (its box in the stored value included), against what the maps of
/// Strings it replaced kept and a slice of boxed strings would.
#[test]
fn derived_of_a_pod_is_small() {
    let pod = deployment_pod();
    let (value, now) = attrs_of(kind("pods"), &pod);
    let attrs = &items::derived(kind("pods"), &value).attrs;
    let paths: Vec<&'static str> = ["metadata.name", "metadata.namespace"]
        .into_iter()
        .chain(items::selectable(kind("pods")).iter().copied())
        .collect();
    // The maps the attributes were kept in before (issue 23), and the
    // metadata span of two usizes; built as derive() built them.
    let (_, maps) = held(|| {
        let labels: BTreeMap<String, String> = attrs
            .labels()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let fields: BTreeMap<&'static str, String> =
            paths.iter().map(|p| (*p, attrs.field(p))).collect();
        Box::new((labels, fields, Some((0usize, 0usize, false))))
    });
    // Boxed strings: labels by key, fields by index.
    #[allow(clippy::type_complexity)]
    let (_, boxed) = held(|| {
        let labels: Box<[(Box<str>, Box<str>)]> =
            attrs.labels().map(|(k, v)| (k.into(), v.into())).collect();
        let fields: Box<[Box<str>]> = paths.iter().map(|p| attrs.field_str(p).into()).collect();
        Box::new((paths.as_slice(), labels, fields, Some((0u32, 0u32, false))))
    });
    eprintln!("heap bytes per pod Derived: maps {maps}, boxed strings {boxed}, one string {now}");
    assert!(now * 3 < maps, "{now} vs {maps}");
    assert!(now < boxed, "{now} vs {boxed}");
}

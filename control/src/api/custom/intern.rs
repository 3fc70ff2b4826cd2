//! `&'static` resource descriptions for custom resources. The API server
//! passes `&'static ResourceInfo` everywhere (built-in resources live in a
//! static table); a custom resource's is built from its CRD and leaked,
//! once per distinct value: the same definition served again, by this or
//! another API server in the process, gets the same reference back, so
//! memory is bounded by the distinct definitions ever seen, not by how
//! often they change. This is interning, not a registry: what is served is
//! each API server's own [`super::CustomResources`].

use std::sync::Mutex;

use bosun::resources::ResourceInfo;

#[derive(Default)]
struct Interned {
    strs: Vec<&'static str>,
    lists: Vec<&'static [&'static str]>,
    infos: Vec<&'static ResourceInfo>,
}

static INTERNED: Mutex<Interned> = Mutex::new(Interned {
    strs: Vec::new(),
    lists: Vec::new(),
    infos: Vec::new(),
});

fn str_in(t: &mut Interned, s: &str) -> &'static str {
    if let Some(found) = t.strs.iter().find(|x| **x == s) {
        return found;
    }
    let leaked: &'static str = Box::leak(s.to_string().into_boxed_str());
    t.strs.push(leaked);
    leaked
}

fn list_in(t: &mut Interned, items: &[String]) -> &'static [&'static str] {
    let strs: Vec<&'static str> = items.iter().map(|s| str_in(t, s)).collect();
    if let Some(found) = t.lists.iter().find(|x| **x == strs.as_slice()) {
        return found;
    }
    let leaked: &'static [&'static str] = Box::leak(strs.into_boxed_slice());
    t.lists.push(leaked);
    leaked
}

fn info_in(t: &mut Interned, info: ResourceInfo) -> &'static ResourceInfo {
    if let Some(found) = t.infos.iter().find(|x| ***x == info) {
        return found;
    }
    let leaked: &'static ResourceInfo = Box::leak(Box::new(info));
    t.infos.push(leaked);
    leaked
}

/// The owned parts of a custom resource's description.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Description {
    pub group: String,
    pub version: String,
    pub kind: String,
    pub plural: String,
    pub singular: String,
    pub namespaced: bool,
    pub short_names: Vec<String>,
    pub categories: Vec<String>,
    pub subresources: Vec<String>,
    pub storage_version: String,
    pub selectable_fields: Vec<String>,
}

/// The one `&'static ResourceInfo` for `d`.
pub fn resource(d: &Description) -> &'static ResourceInfo {
    let mut t = INTERNED.lock().expect("intern lock");
    let info = ResourceInfo {
        group: str_in(&mut t, &d.group),
        version: str_in(&mut t, &d.version),
        kind: str_in(&mut t, &d.kind),
        plural: str_in(&mut t, &d.plural),
        singular: str_in(&mut t, &d.singular),
        namespaced: d.namespaced,
        short_names: list_in(&mut t, &d.short_names),
        categories: list_in(&mut t, &d.categories),
        subresources: list_in(&mut t, &d.subresources),
        storage_version: str_in(&mut t, &d.storage_version),
        selectable_fields: list_in(&mut t, &d.selectable_fields),
    };
    info_in(&mut t, info)
}

/// The entry of a custom resource's storage version (the same resource
/// at `storage_version`), interned like the others.
pub fn storage_entry(res: &'static ResourceInfo) -> &'static ResourceInfo {
    if res.is_storage_version() {
        return res;
    }
    let mut t = INTERNED.lock().expect("intern lock");
    info_in(
        &mut t,
        ResourceInfo {
            version: res.storage_version,
            ..*res
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_descriptions_share_one_reference() {
        let d = Description {
            group: "intern.example.com".into(),
            version: "v1".into(),
            kind: "Widget".into(),
            plural: "widgets".into(),
            storage_version: "v1".into(),
            short_names: vec!["wd".into()],
            ..Default::default()
        };
        let a = resource(&d);
        let b = resource(&d.clone());
        assert!(std::ptr::eq(a, b));
        assert!(std::ptr::eq(a.short_names, b.short_names));
        let other = resource(&Description {
            namespaced: true,
            ..d.clone()
        });
        assert!(!std::ptr::eq(a, other));
        assert!(std::ptr::eq(a.plural, other.plural));
        let v2 = resource(&Description {
            version: "v2".into(),
            ..d
        });
        assert!(std::ptr::eq(storage_entry(v2), a));
    }
}

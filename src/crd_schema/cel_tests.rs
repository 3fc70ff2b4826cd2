//! CEL `x-kubernetes-validations`: messages, reasons, transition rules,
//! ratcheting, and the library the rules can call.

use serde_json::json;

use super::cel;
use super::tests::{compile, msgs, obj, with_spec};
use super::Structural;

#[test]
fn cel_rules() {
    let s = compile(json!({"type": "object", "properties": {"spec": {
        "type": "object",
        "x-kubernetes-validations": [
            {"rule": "self.min <= self.max", "message": "min must not exceed max"},
            {"rule": "self.max < 100"},
            {"rule": "!has(self.name) || self.name.startsWith('x')", "messageExpression": "'name ' + self.name + ' must start with x'"},
            {"rule": "self.min == oldSelf.min", "message": "min is immutable", "fieldPath": ".min"},
            {"rule": "size(self.tags) <= 2", "reason": "FieldValueForbidden", "message": "too many tags"},
            {"rule": "self.tags.all(t, t.matches('^[a-z]+$')) && self.tags.exists_one(t, t == 'main')"},
        ],
        "properties": {
            "min": {"type": "integer"}, "max": {"type": "integer"}, "name": {"type": "string"},
            "tags": {"type": "array", "items": {"type": "string"}, "default": ["main"]},
            "sorted": {"type": "array", "items": {"type": "integer"},
                "x-kubernetes-validations": [{"rule": "self.isSorted() && self.sum() < 10"}]},
        },
    }}}));
    let good = obj(json!({"min": 1, "max": 5, "tags": ["main"], "sorted": [1, 2]}));
    assert!(
        s.validate(&good, None).is_empty(),
        "{:?}",
        msgs(&s.validate(&good, None))
    );
    assert!(s.validate(&good, Some(&good)).is_empty());
    let bad = obj(
        json!({"min": 200, "max": 150, "name": "abc", "tags": ["main", "b", "Main"], "sorted": [3, 1]}),
    );
    assert_eq!(
        msgs(&s.validate(&bad, None)),
        vec![
            "spec: Invalid value: \"object\": min must not exceed max",
            "spec: Invalid value: \"object\": failed rule: self.max < 100",
            "spec: Invalid value: \"object\": name abc must start with x",
            "spec: Forbidden: too many tags",
            "spec: Invalid value: \"object\": failed rule: self.tags.all(t, t.matches('^[a-z]+$')) && self.tags.exists_one(t, t == 'main')",
            "spec.sorted: Invalid value: \"array\": failed rule: self.isSorted() && self.sum() < 10",
        ]
    );
    // The transition rule runs only on update, against the old object.
    let changed = obj(json!({"min": 2, "max": 5, "tags": ["main"]}));
    assert!(s.validate(&changed, None).is_empty());
    assert_eq!(
        msgs(&s.validate(&changed, Some(&good))),
        vec!["spec.min: Invalid value: \"object\": min is immutable"]
    );
    // A rule that cannot run names the rule and the error.
    let missing = obj(json!({"min": 1, "tags": ["main"]}));
    assert_eq!(
        msgs(&s.validate(&missing, None)),
        vec![
            "spec: Invalid value: \"object\": no such key: max evaluating rule: min must not exceed max",
            "spec: Invalid value: \"object\": no such key: max evaluating rule: self.max < 100",
        ]
    );
}

#[test]
fn cel_rules_on_scalars_and_map_lists() {
    let s = compile(with_spec(json!({
        "name": {"type": "string", "x-kubernetes-validations": [{"rule": "self.size() < 4"}]},
        "ports": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
            "items": {"type": "object", "properties": {"name": {"type": "string"}, "port": {"type": "integer"}},
                "x-kubernetes-validations": [{"rule": "self.port == oldSelf.port", "message": "port is immutable"}]}},
    })));
    // A scalar is shown by its value.
    assert_eq!(
        msgs(&s.validate(&obj(json!({"name": "toolong"})), None)),
        vec!["spec.name: Invalid value: \"toolong\": failed rule: self.size() < 4"]
    );
    // Map-list items meet their old selves by key, wherever they moved.
    let old = obj(json!({"ports": [{"name": "a", "port": 1}, {"name": "b", "port": 2}]}));
    let moved = obj(
        json!({"ports": [{"name": "b", "port": 2}, {"name": "c", "port": 9}, {"name": "a", "port": 1}]}),
    );
    assert!(s.validate(&moved, Some(&old)).is_empty());
    let changed = obj(json!({"ports": [{"name": "b", "port": 3}]}));
    assert_eq!(
        msgs(&s.validate(&changed, Some(&old))),
        vec!["spec.ports[0]: Invalid value: \"object\": port is immutable"]
    );
}

#[test]
fn root_rules_see_only_name_of_metadata() {
    let s = compile(json!({"type": "object",
        "x-kubernetes-validations": [
            {"rule": "self.metadata.name.startsWith('a')", "message": "name must start with a"},
            {"rule": "!has(self.metadata.labels)"},
        ],
        "properties": {"spec": {"type": "object"}}}));
    let mut o = obj(json!({}));
    o["metadata"]["labels"] = json!({"x": "y"});
    assert_eq!(msgs(&s.validate(&o, None)), Vec::<String>::new());
    o["metadata"]["name"] = json!("b");
    assert_eq!(
        msgs(&s.validate(&o, None)),
        vec!["<nil>: Invalid value: \"object\": name must start with a"]
    );
}

#[test]
fn ratcheting_unchanged_values_on_update() {
    let s = compile(with_spec(json!({
        "name": {"type": "string", "maxLength": 5},
        "replicas": {"type": "integer"},
        "limits": {"type": "object", "properties": {"max": {"type": "integer"}},
            "x-kubernetes-validations": [{"rule": "self.max < 10"}]},
        "version": {"type": "integer", "x-kubernetes-validations": [{"rule": "self >= oldSelf", "message": "may not go back"}]},
    })));
    // A `number` written as an integer is a double to the rules.
    let n = compile(with_spec(json!({"ratio": {"type": "number",
        "x-kubernetes-validations": [{"rule": "self * 2.5 <= 5.0"}]}})));
    assert_eq!(
        msgs(&n.validate(&obj(json!({"ratio": 2})), None)),
        Vec::<String>::new()
    );
    assert_eq!(
        msgs(&n.validate(&obj(json!({"ratio": 3})), None)),
        vec!["spec.ratio: Invalid value: 3: failed rule: self * 2.5 <= 5.0"]
    );
    // Stored before the schema tightened.
    let old = obj(json!({"name": "toolong", "replicas": 1, "limits": {"max": 50}, "version": 3}));
    let new = obj(json!({"name": "toolong", "replicas": 2, "limits": {"max": 50}, "version": 3}));
    assert_eq!(msgs(&s.validate(&new, Some(&old))), Vec::<String>::new());
    // A create, or a change to the offending values, is checked in full.
    assert_eq!(msgs(&s.validate(&new, None)).len(), 2);
    let changed =
        obj(json!({"name": "toolonger", "replicas": 2, "limits": {"max": 60}, "version": 2}));
    assert_eq!(
        msgs(&s.validate(&changed, Some(&old))),
        vec![
            "spec.name: Too long: may not be more than 5 bytes",
            "spec.limits: Invalid value: \"object\": failed rule: self.max < 10",
            "spec.version: Invalid value: 2: may not go back",
        ]
    );
}

#[test]
fn cel_library() {
    let v = json!({"l": [1, 2, 3], "s": "Hello", "m": {"a": 1}, "f": 1.5});
    for (expr, want) in [
        ("self.l.map(x, x * 2)[2] == 6", true),
        ("self.l.filter(x, x > 1).size() == 2", true),
        ("self.m.exists(k, k == 'a')", true),
        (
            "self.s.lowerAscii().endsWith('lo') && self.s.contains('ell')",
            true,
        ),
        ("self.l.min() == 1 && self.l.max() == 3", true),
        ("self.f > 1 && int(self.f) == 1", true),
        ("has(self.nope)", false),
        ("self.l[0] < 1.5 && 2.0 > self.l[0] && self.f != 1", true),
        ("self.l[0] == 1.0", true),
    ] {
        let p = cel::compile(expr).unwrap();
        assert_eq!(p.eval_bool(&[("self", &v)]), Ok(want), "{expr}");
    }
    let declared = ["self", "oldSelf"];
    for ok in [
        "self.all(x, x > 0) && self.exists(k, v, v > 0)",
        "math.abs(-1) == 1 && type(self) == map",
        "[1].all(i, [2].exists(j, i < j)) && oldSelf == self",
    ] {
        assert!(cel::compile_with(ok, &declared).is_ok(), "{ok}");
    }
    assert_eq!(
        cel::compile_with("self.a > foo", &declared).unwrap_err(),
        "ERROR: <input>:1:10: undeclared reference to 'foo' (in container '')"
    );
    let e = cel::compile("self.l ==").unwrap_err();
    assert!(e.starts_with("ERROR: <input>:1:10: Syntax error"), "{e}");
    fn send_sync<T: Send + Sync>() {}
    send_sync::<Structural>();
    send_sync::<cel::Program>();
}

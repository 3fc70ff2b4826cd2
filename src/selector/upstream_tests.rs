//! The label and field selector parsers held to upstream's behaviour, on
//! the cases of apimachinery's `labels/selector_test.go` and
//! `fields/selector_test.go` (TestSelectorParse, TestSetSelectorParser,
//! TestSelectorMatches, TestSplitTerms, TestSplitTerm, TestEscapeValue):
//! which strings parse, to what, what they match, and upstream's messages
//! where they fail.

use super::fields::{split_term, split_terms};
use super::*;

fn set(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn req(key: &str, op: Operator, values: &[&str]) -> Requirement {
    Requirement::new(key, op, values.iter().map(|v| v.to_string())).unwrap()
}

#[test]
fn label_strings_that_parse_print_back_without_blanks() {
    for s in [
        "x=a,y=b,z=c",
        "",
        "x!=a,y=b",
        "x=",
        "x= ",
        "x=,z= ",
        "x= ,z= ",
        "!x",
        "x>1",
        "x>1,z<5",
    ] {
        let sel = LabelSelector::parse(s).unwrap_or_else(|e| panic!("{s:?}: {e}"));
        assert_eq!(sel.to_string(), s.replace(' ', ""), "{s:?}");
    }
}

#[test]
fn label_strings_parse_to_upstreams_requirements() {
    use Operator::*;
    let cases: Vec<(&str, Vec<Requirement>)> = vec![
        ("\rx", vec![req("x", Exists, &[])]),
        (
            "this-is-a-dns.domain.com/key-with-dash",
            vec![req("this-is-a-dns.domain.com/key-with-dash", Exists, &[])],
        ),
        (
            "this-is-another-dns.domain.com/key-with-dash in (so,what)",
            vec![req(
                "this-is-another-dns.domain.com/key-with-dash",
                In,
                &["so", "what"],
            )],
        ),
        (
            "0.1.2.domain/99 notin (10.10.100.1, tick.tack.clock)",
            vec![req(
                "0.1.2.domain/99",
                NotIn,
                &["10.10.100.1", "tick.tack.clock"],
            )],
        ),
        ("foo  in\t (abc)", vec![req("foo", In, &["abc"])]),
        ("x notin\n (abc)", vec![req("x", NotIn, &["abc"])]),
        (
            "x  notin\t\t\t(abc,def)",
            vec![req("x", NotIn, &["abc", "def"])],
        ),
        ("x in (abc,def)", vec![req("x", In, &["abc", "def"])]),
        // An empty element, and an empty list, are the empty value.
        ("x in (abc,)", vec![req("x", In, &["abc", ""])]),
        ("x in ()", vec![req("x", In, &[""])]),
        ("x notin ( )", vec![req("x", NotIn, &[""])]),
        ("x notin (, a)", vec![req("x", NotIn, &["", "a"])]),
        (
            "x notin (abc,,def),bar,z in (),w",
            vec![
                req("bar", Exists, &[]),
                req("w", Exists, &[]),
                req("x", NotIn, &["abc", "", "def"]),
                req("z", In, &[""]),
            ],
        ),
        (
            "x,y in (a)",
            vec![req("x", Exists, &[]), req("y", In, &["a"])],
        ),
        ("x=a", vec![req("x", Equals, &["a"])]),
        ("x>1", vec![req("x", GreaterThan, &["1"])]),
        ("x<7", vec![req("x", LessThan, &["7"])]),
        (
            "x=a,y!=b,z in (h,i,j)",
            vec![
                req("x", Equals, &["a"]),
                req("y", NotEquals, &["b"]),
                req("z", In, &["h", "i", "j"]),
            ],
        ),
        ("a ", vec![req("a", Exists, &[])]),
        // `in` and `notin` are words where a key or a value stands.
        (
            "a in (x,y,notin, z,in)",
            vec![req("a", In, &["in", "notin", "x", "y", "z"])],
        ),
        ("notin=in", vec![req("notin", Equals, &["in"])]),
        ("in notin (notin)", vec![req("in", NotIn, &["notin"])]),
    ];
    for (s, want) in cases {
        let sel = LabelSelector::parse(s).unwrap_or_else(|e| panic!("{s:?}: {e}"));
        assert_eq!(sel.requirements(), want.as_slice(), "{s:?}");
    }
}

#[test]
fn label_strings_upstream_refuses_with_its_messages() {
    let cases = [
        // Clients join terms, but labels.Parse refuses a trailing comma.
        ("app=web,", "found '', expected: identifier after ','"),
        ("a in (xyz),", "found '', expected: identifier after ','"),
        ("x,,y", "found ',', expected: identifier after ','"),
        (
            ",x,y",
            "found ',', expected: !, identifier, or 'end of string'",
        ),
        (
            "(",
            "found '(', expected: !, identifier, or 'end of string'",
        ),
        ("!x=a", "found '=', expected: ',' or 'end of string'"),
        ("x==a==b", "found '==', expected: ',' or 'end of string'"),
        (
            "a in (xyz)b notin ()",
            "found 'b', expected: ',' or 'end of string'",
        ),
        (
            "a (",
            "unable to parse requirement: found '(', expected: in, notin, =, ==, !=, gt, lt",
        ),
        (
            "x nott in (y)",
            "unable to parse requirement: found 'nott', expected: in, notin, =, ==, !=, gt, lt",
        ),
        (
            "a notin(",
            "unable to parse requirement: found '', expected: ',', ')' or identifier",
        ),
        (
            "a in (xyz abc)",
            "unable to parse requirement: found 'abc', expected: ',' or ')'",
        ),
        (
            "env in prod",
            "unable to parse requirement: found 'prod' expected: '('",
        ),
        (
            "!",
            "unable to parse requirement: found '', expected: identifier",
        ),
        (
            "x=(",
            "unable to parse requirement: found '(', expected: identifier",
        ),
    ];
    for (s, want) in cases {
        let e = LabelSelector::parse(s).expect_err(s);
        assert_eq!(e.0, want, "{s:?}");
    }
    // Refused by the requirement's checks (key, value, integer).
    for s in ["x=a||y=b", "x<a", "\u{b}x", "a\u{a0}b=c"] {
        assert!(LabelSelector::parse(s).is_err(), "{s:?}");
    }
}

#[test]
fn label_selectors_match_as_upstream() {
    let yes: &[(&str, &[(&str, &str)])] = &[
        ("", &[("x", "y")]),
        ("x=y", &[("x", "y")]),
        ("x=y,z=w", &[("x", "y"), ("z", "w")]),
        ("x!=y,z!=w", &[("x", "z"), ("z", "a")]),
        ("notin=in", &[("notin", "in")]),
        ("x", &[("x", "z")]),
        ("!x", &[("y", "z")]),
        ("x>1", &[("x", "2")]),
        ("x<1", &[("x", "0")]),
        ("x in (abc,)", &[("x", "")]),
        ("x in ()", &[("x", "")]),
    ];
    let no: &[(&str, &[(&str, &str)])] = &[
        ("x=z", &[]),
        ("x=y", &[("x", "z")]),
        ("x=y,z=w", &[("x", "w"), ("z", "w")]),
        ("x!=y,z!=w", &[("x", "z"), ("z", "w")]),
        ("x", &[("y", "z")]),
        ("!x", &[("x", "z")]),
        ("x>1", &[("x", "0")]),
        ("x<1", &[("x", "2")]),
        ("x in ()", &[("x", "a")]),
    ];
    for (s, labels) in yes {
        assert!(
            LabelSelector::parse(s).unwrap().matches(&set(labels)),
            "{s:?}"
        );
    }
    for (s, labels) in no {
        assert!(
            !LabelSelector::parse(s).unwrap().matches(&set(labels)),
            "{s:?}"
        );
    }
}

#[test]
fn field_terms_split_as_upstream() {
    let terms: &[(&str, &[&str])] = &[
        ("a", &["a"]),
        ("a=avalue", &["a=avalue"]),
        ("a=avalue,b=bvalue", &["a=avalue", "b=bvalue"]),
        (
            "a=avalue,b==bvalue,c!=cvalue",
            &["a=avalue", "b==bvalue", "c!=cvalue"],
        ),
        ("a=a,", &["a=a", ""]),
        (",a=a", &["", "a=a"]),
        (r"k=\,,k2=v2", &[r"k=\,", "k2=v2"]),
        (r"k=\\,k2=v2", &[r"k=\\", "k2=v2"]),
        (r"k=\\\,,k2=v2", &[r"k=\\\,", "k2=v2"]),
        (r"k=\a\b\", &[r"k=\a\b\"]),
        (r"k=\", &[r"k=\"]),
        ("함=수,목=록", &["함=수", "목=록"]),
    ];
    for (s, want) in terms {
        assert_eq!(split_terms(s), *want, "{s:?}");
    }
    type Split<'a> = Option<(&'a str, bool, &'a str)>;
    let term: &[(&str, Split)] = &[
        ("a=value", Some(("a", false, "value"))),
        ("b==value", Some(("b", false, "value"))),
        ("c!=value", Some(("c", true, "value"))),
        ("", None),
        ("a", None),
        (r"k=\,", Some(("k", false, r"\,"))),
        (r"k=\=", Some(("k", false, r"\="))),
        (r"k=\\\a\b\=\,\", Some(("k", false, r"\\\a\b\=\,\"))),
        ("함=수", Some(("함", false, "수"))),
        // No escapes in the field name: the first operator splits.
        (r"a\=b=c", Some((r"a\", false, "b=c"))),
    ];
    for (s, want) in term {
        assert_eq!(split_term(s), *want, "{s:?}");
    }
}

#[test]
fn field_selectors_parse_and_fail_as_upstream() {
    for s in [
        "x=a,y=b,z=c",
        "",
        "x!=a,y=b",
        r"x=a||y\=b",
        r"x=a\=\=b",
        // Empty terms are skipped: clients join terms with commas.
        "metadata.name=x,",
        ",metadata.name=x",
        "a=b,,c=d",
        ",",
        // The field is the caller's to check.
        "=x",
    ] {
        assert!(FieldSelector::parse(s).is_ok(), "{s:?}");
    }
    let cases = [
        (
            "x=a||y=b",
            "invalid field selector: unescaped character in value: 61",
        ),
        (
            "x==a==b",
            "invalid field selector: unescaped character in value: 61",
        ),
        ("x=a,b", "invalid selector: 'x=a,b'; can't understand 'b'"),
        (
            "x in (a)",
            "invalid selector: 'x in (a)'; can't understand 'x in (a)'",
        ),
        (
            "x in (a,b,c)",
            "invalid selector: 'x in (a,b,c)'; can't understand 'b'",
        ),
        ("x", "invalid selector: 'x'; can't understand 'x'"),
        (" ", "invalid selector: ' '; can't understand ' '"),
        (
            r"k=\",
            r"invalid field selector: invalid escape sequence: \",
        ),
        (
            r"k=\\\",
            r"invalid field selector: invalid escape sequence: \",
        ),
        (
            r"k=\a",
            r"invalid field selector: invalid escape sequence: \a",
        ),
        (
            r"k=\!",
            r"invalid field selector: invalid escape sequence: \!",
        ),
    ];
    for (s, want) in cases {
        assert_eq!(FieldSelector::parse(s).expect_err(s).0, want, "{s:?}");
    }
    // Nothing is trimmed.
    let spaced = FieldSelector::parse("a = b").unwrap();
    assert_eq!(spaced.terms()[0].field, "a ");
    assert_eq!(spaced.terms()[0].value, " b");
    let sorted = FieldSelector::parse("x=a,a=x").unwrap();
    assert_eq!(sorted.fields(), ["a", "x"]);
}

#[test]
fn field_selectors_match_as_upstream() {
    let fields = set(&[("foo", "bar"), ("baz", "blah"), ("complex", r"=value\,\")]);
    let get = |f: &str| fields.get(f).cloned();
    let xy = set(&[("x", "y")]);
    assert!(FieldSelector::parse("")
        .unwrap()
        .matches(|f| xy.get(f).cloned()));
    for (s, want) in [
        ("foo=bar", true),
        ("baz=blah", true),
        ("foo=bar,baz=blah", true),
        (r"foo=bar,baz=blah,complex=\=value\\\,\\", true),
        ("foo=bar,", true),
        ("foo=blah", false),
        ("baz=bar", false),
        ("foo=bar,foobar=bar,baz=blah", false),
        ("foo!=bar", false),
        ("foobar!=x", true),
    ] {
        assert_eq!(FieldSelector::parse(s).unwrap().matches(get), want, "{s:?}");
    }
}

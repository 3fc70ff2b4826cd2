//! The labels and selectable fields of a stored object, kept compact
//! ([`Attrs`]).

use std::collections::BTreeMap;

/// The labels and the selectable fields of an object, as label and field
/// selectors see them (kube-apiserver's `GetAttrs`): a missing field is "".
///
/// Kept compact, as several versions of every object are alive at once
/// (the store's newest, older ones in watch events in flight): the label
/// keys and values, sorted by key, then the value of every field of the
/// kind's list (metadata.name, metadata.namespace, then
/// [`super::items::selectable`]'s) in its order, all in one string, with
/// where each ends. A map of Strings cost several times that.
#[derive(Default, PartialEq, Eq)]
pub struct Attrs {
    /// The kind's selectable fields besides metadata.name and
    /// metadata.namespace ([`super::items::selectable`]).
    selectable: &'static [&'static str],
    /// Each label's key and value, then each field's value.
    text: Box<str>,
    /// Where in `text` each label's key and value end (two per label),
    /// then where each field's value ends.
    ends: Box<[u32]>,
    /// How many labels there are.
    labels: u32,
}

/// The fields every kind is selected by, ahead of the kind's own.
const META_FIELDS: [&str; 2] = ["metadata.name", "metadata.namespace"];

/// Where `text` ends now, as an [`Attrs`] end.
fn end_of(text: &str) -> u32 {
    u32::try_from(text.len()).expect("an object's attributes fit in 4 GiB")
}

impl Attrs {
    /// The attributes of an object of a kind selectable by `selectable`
    /// besides metadata.name and metadata.namespace: its `labels`, sorted
    /// by key and each key once, and its fields' values, each appended by
    /// `field` (nothing for a missing one).
    pub fn new<'a>(
        selectable: &'static [&'static str],
        labels: impl ExactSizeIterator<Item = (&'a str, &'a str)> + Clone,
        mut field: impl FnMut(&str, &mut String),
    ) -> Attrs {
        let count = labels.len();
        let mut text = String::with_capacity(labels.clone().map(|(k, v)| k.len() + v.len()).sum());
        let mut ends = Vec::with_capacity(2 * count + META_FIELDS.len() + selectable.len());
        let mut last: Option<&str> = None;
        for (key, value) in labels {
            debug_assert!(last < Some(key), "labels sorted by key, each once");
            last = Some(key);
            text.push_str(key);
            ends.push(end_of(&text));
            text.push_str(value);
            ends.push(end_of(&text));
        }
        for path in META_FIELDS.iter().chain(selectable) {
            field(path, &mut text);
            ends.push(end_of(&text));
        }
        Attrs {
            selectable,
            text: text.into_boxed_str(),
            ends: ends.into_boxed_slice(),
            labels: u32::try_from(count).expect("fewer than 2^32 labels"),
        }
    }

    /// The string the `i`th end closes.
    fn part(&self, i: usize) -> &str {
        let start = if i == 0 { 0 } else { self.ends[i - 1] as usize };
        &self.text[start..self.ends[i] as usize]
    }

    /// A label's key and value, the `i`th by key.
    fn label_at(&self, i: usize) -> (&str, &str) {
        (self.part(2 * i), self.part(2 * i + 1))
    }

    /// A label's value, None when the object has no such label.
    pub fn label(&self, key: &str) -> Option<&str> {
        let (mut lo, mut hi) = (0, self.labels as usize);
        while lo < hi {
            let mid = (lo + hi) / 2;
            let (k, v) = self.label_at(mid);
            match k.cmp(key) {
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
                std::cmp::Ordering::Equal => return Some(v),
            }
        }
        None
    }

    /// The labels, sorted by key.
    pub fn labels(&self) -> impl Iterator<Item = (&str, &str)> {
        (0..self.labels as usize).map(|i| self.label_at(i))
    }

    /// A field's value; fields the kind cannot be selected by are "".
    pub fn field_str(&self, path: &str) -> &str {
        let index = match META_FIELDS.iter().position(|f| *f == path) {
            Some(i) => i,
            None => match self.selectable.iter().position(|f| *f == path) {
                Some(i) => META_FIELDS.len() + i,
                None => return "",
            },
        };
        let i = 2 * self.labels as usize + index;
        if i < self.ends.len() {
            self.part(i)
        } else {
            ""
        }
    }

    /// A field's value; fields the kind cannot be selected by are "".
    pub fn field(&self, path: &str) -> String {
        self.field_str(path).to_string()
    }
}

impl std::fmt::Debug for Attrs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let fields = META_FIELDS.iter().chain(self.selectable);
        f.debug_struct("Attrs")
            .field("labels", &self.labels().collect::<BTreeMap<_, _>>())
            .field(
                "fields",
                &fields
                    .map(|p| (*p, self.field_str(p)))
                    .collect::<BTreeMap<_, _>>(),
            )
            .finish()
    }
}

#[cfg(test)]
mod tests;

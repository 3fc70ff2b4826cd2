//! The text `describe` writes: kubectl's tab-aligned `Key:  value` lines (Go's
//! text/tabwriter), and the value formats every layout uses (times, `<none>`, keys).

use chrono::{DateTime, Utc};
use serde_json::Value;

/// Go's text/tabwriter as kubectl's describe uses it (min width 0,
/// padding 2): a column block is a run of consecutive lines that have a
/// tab-terminated cell in that column; the last cell of a line is not padded.
pub fn tabwrite(text: &str, minwidth: usize, padding: usize) -> String {
    let lines: Vec<Vec<&str>> = text.lines().map(|l| l.split('\t').collect()).collect();
    let mut widths: Vec<Vec<usize>> = lines.iter().map(|l| vec![0; l.len()]).collect();
    fn format(
        lines: &[Vec<&str>],
        widths: &mut [Vec<usize>],
        column: usize,
        start: usize,
        end: usize,
        minwidth: usize,
        padding: usize,
    ) {
        let mut this = start;
        while this < end {
            if column + 1 >= lines[this].len() {
                this += 1;
                continue;
            }
            let block_start = this;
            let mut width = minwidth;
            while this < end && column + 1 < lines[this].len() {
                width = width.max(lines[this][column].chars().count() + padding);
                this += 1;
            }
            for w in widths.iter_mut().take(this).skip(block_start) {
                w[column] = width;
            }
            format(
                lines,
                widths,
                column + 1,
                block_start,
                this,
                minwidth,
                padding,
            );
        }
    }
    format(&lines, &mut widths, 0, 0, lines.len(), minwidth, padding);
    let mut out = String::new();
    for (line, w) in lines.iter().zip(&widths) {
        for (i, cell) in line.iter().enumerate() {
            out.push_str(cell);
            if i + 1 < line.len() {
                let pad = w[i].saturating_sub(cell.chars().count());
                out.extend(std::iter::repeat_n(' ', pad));
            }
        }
        out.push('\n');
    }
    out
}

/// Output collected with tabs, aligned at the end.
#[derive(Default)]
pub(super) struct Out(pub(super) String);

impl Out {
    pub(super) fn line(&mut self, indent: usize, text: &str) {
        self.0.push_str(&" ".repeat(indent));
        self.0.push_str(text);
        self.0.push('\n');
    }
    pub(super) fn kv(&mut self, indent: usize, key: &str, value: &str) {
        self.line(indent, &format!("{key}:\t{value}"));
    }
    /// `Labels:  a=b` with further pairs on their own lines.
    pub(super) fn map(&mut self, indent: usize, key: &str, map: &Value, sep: &str, skip: &[&str]) {
        let mut pairs: Vec<String> = map
            .as_object()
            .map(|m| {
                m.iter()
                    .filter(|(k, _)| !skip.contains(&k.as_str()))
                    .map(|(k, v)| format!("{k}{sep}{}", v.as_str().unwrap_or_default()))
                    .collect()
            })
            .unwrap_or_default();
        pairs.sort();
        if pairs.is_empty() {
            self.kv(indent, key, "<none>");
            return;
        }
        self.kv(indent, key, &pairs[0]);
        // kubectl writes further pairs as `\tpair`, without the key's indent.
        for p in &pairs[1..] {
            self.line(0, &format!("\t{p}"));
        }
    }
    /// `Key:  first` with further items on their own lines, as kubectl's
    /// `print…Multiline` helpers; `<none>` when there are none.
    pub(super) fn list<S: AsRef<str>>(&mut self, indent: usize, key: &str, items: &[S]) {
        match items.split_first() {
            None => self.kv(indent, key, "<none>"),
            Some((first, rest)) => {
                self.kv(indent, key, first.as_ref());
                for item in rest {
                    self.line(0, &format!("\t{}", item.as_ref()));
                }
            }
        }
    }
    pub(super) fn finish(self) -> String {
        tabwrite(&self.0, 0, 2)
    }
}

pub(super) fn parse_time(v: &Value) -> Option<DateTime<Utc>> {
    v.as_str()
        .and_then(|s| DateTime::parse_from_rfc3339(s).ok())
        .map(|t| t.with_timezone(&Utc))
}

pub(super) fn rfc1123z(v: &Value) -> String {
    parse_time(v)
        .map(|t| t.format("%a, %d %b %Y %H:%M:%S %z").to_string())
        .unwrap_or_else(|| "<unknown>".to_string())
}

/// A JSON string as text, "" for anything else.
pub(super) fn str_of(v: &Value) -> &str {
    v.as_str().unwrap_or_default()
}

pub(super) fn or_none(s: &str) -> &str {
    if s.is_empty() {
        "<none>"
    } else {
        s
    }
}

/// `claimName` -> `ClaimName`, as kubectl's generic describer shows keys.
pub(super) fn title_case(k: &str) -> String {
    let mut c = k.chars();
    match c.next() {
        Some(f) => f.to_uppercase().collect::<String>() + c.as_str(),
        None => String::new(),
    }
}

//! Text that reaches a terminal or a markdown file: figures in a bounded width, and strings from
//! a profile, a spec or the machine (a hostname, a drive's model, a note) escaped so that they
//! cannot move the cursor, ring, retitle the terminal or break a table or heading.
//!
//! Strings are escaped where they enter a rendering ([`escape_strings`] over the whole profile),
//! not at each of the hundreds of places that print one: the renderers then print only text
//! hwceiling wrote and data already made inert.

use serde::de::DeserializeOwned;
use serde::Serialize;
use std::borrow::Cow;

/// Past this magnitude a figure is printed in scientific notation (`1.000e308`), so no
/// figure is wider than about a dozen characters.
pub const FIXED_MAX: f64 = 1e9;

/// `v` with `decimals` decimals, bounded: scientific notation from [`FIXED_MAX`] on, `NaN` and
/// `inf` spelled out, and never a negative zero (`-0.000` prints `0.000`).
pub fn fixed(v: f64, decimals: usize) -> String {
    if v.is_nan() {
        return "NaN".into();
    }
    if v.is_infinite() {
        return if v > 0.0 { "inf" } else { "-inf" }.into();
    }
    if v.abs() >= FIXED_MAX {
        return format!("{:.*e}", decimals.clamp(1, 3), v);
    }
    let s = format!("{v:.decimals$}");
    match s.strip_prefix('-') {
        Some(rest) if rest.bytes().all(|b| b == b'0' || b == b'.') => rest.to_string(),
        _ => s,
    }
}

/// `s` with every control character (C0, DEL, C1: escape sequences, BEL, NUL, newlines, tabs)
/// written as a visible escape (`\e`, `\n`, `\u{7}`), for a terminal.
pub fn escape_control(s: &str) -> Cow<'_, str> {
    if !s.chars().any(char::is_control) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        push_visible(&mut out, c);
    }
    Cow::Owned(out)
}

fn push_visible(out: &mut String, c: char) {
    match c {
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        '\t' => out.push_str("\\t"),
        '\u{1b}' => out.push_str("\\e"),
        c if c.is_control() => out.push_str(&c.escape_unicode().to_string()),
        c => out.push(c),
    }
}

/// `s` inert in markdown (a table cell, a heading, a list item): control characters as for a
/// terminal, and the characters that open markup (`\ ` * [ ] < > |`, `_` and `~` that start or
/// end a word, `#` `+` `-` `=` `!` leading) escaped with a backslash. Letters, digits, `/`, `.`,
/// `:` and intra-word `_` (every key and identifier hwceiling writes) pass unchanged.
pub fn escape_markdown(s: &str) -> Cow<'_, str> {
    let chars: Vec<char> = s.chars().collect();
    let word = |i: Option<usize>| {
        i.and_then(|i| chars.get(i))
            .is_some_and(|c| c.is_alphanumeric())
    };
    let special = |i: usize| match chars[i] {
        '\\' | '`' | '*' | '[' | ']' | '<' | '>' | '|' => true,
        '_' | '~' => !(word(i.checked_sub(1)) && word(Some(i + 1))),
        '#' | '+' | '-' | '=' | '!' => i == 0,
        c => c.is_control(),
    };
    if !(0..chars.len()).any(special) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for (i, &c) in chars.iter().enumerate() {
        if c.is_control() {
            push_visible(&mut out, c);
        } else {
            if special(i) {
                out.push('\\');
            }
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// Why [`escape_strings`] could not rebuild a value.
#[derive(Debug, thiserror::Error)]
#[error("cannot escape the text of this file: {0}")]
pub struct EscapeError(String);

/// A copy of `v` with every string in it (values and map keys) passed through `f`: a profile,
/// a spec or a topology made safe to render once, before any of it is printed. `f` must leave
/// the strings a type parses (enum names, engine ids) unchanged, as [`escape_control`] and
/// [`escape_markdown`] do for every such string hwceiling writes.
pub fn escape_strings<T, F>(v: &T, f: F) -> Result<T, EscapeError>
where
    T: Serialize + DeserializeOwned,
    F: Fn(&str) -> Cow<'_, str> + Copy,
{
    let value = ciborium::Value::serialized(v).map_err(|e| EscapeError(e.to_string()))?;
    escape_value(value, f)
        .deserialized()
        .map_err(|e| EscapeError(e.to_string()))
}

fn escape_value<F>(v: ciborium::Value, f: F) -> ciborium::Value
where
    F: Fn(&str) -> Cow<'_, str> + Copy,
{
    use ciborium::Value;
    match v {
        Value::Text(s) => match f(&s) {
            Cow::Borrowed(_) => Value::Text(s),
            Cow::Owned(o) => Value::Text(o),
        },
        Value::Array(a) => Value::Array(a.into_iter().map(|x| escape_value(x, f)).collect()),
        Value::Map(m) => Value::Map(
            m.into_iter()
                .map(|(k, x)| (escape_value(k, f), escape_value(x, f)))
                .collect(),
        ),
        Value::Tag(t, x) => Value::Tag(t, Box::new(escape_value(*x, f))),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_have_a_bounded_width_and_no_negative_zero() {
        assert_eq!(fixed(55.4912, 2), "55.49");
        assert_eq!(fixed(-0.0, 3), "0.000");
        assert_eq!(fixed(-0.0004, 3), "0.000");
        assert_eq!(fixed(-0.3, 1), "-0.3");
        assert_eq!(fixed(1e308, 3), "1.000e308");
        assert_eq!(fixed(-2.5e12, 2), "-2.50e12");
        assert_eq!(fixed(999_999_999.0, 0), "999999999");
        assert_eq!(fixed(f64::NAN, 2), "NaN");
        assert_eq!(fixed(f64::NEG_INFINITY, 2), "-inf");
        for v in [
            1e308,
            -1e308,
            1e-308,
            123_456_789.123,
            f64::MAX,
            f64::MIN_POSITIVE,
        ] {
            assert!(fixed(v, 3).len() <= 14, "{v}: {}", fixed(v, 3));
        }
    }

    #[test]
    fn control_characters_become_visible_escapes() {
        let host = "evil\u{1b}]0;pwned\u{7}\u{0}\n# heading\tx\u{9b}";
        let e = escape_control(host);
        assert_eq!(e, "evil\\e]0;pwned\\u{7}\\u{0}\\n# heading\\tx\\u{9b}");
        assert!(!e.chars().any(char::is_control));
        assert!(matches!(escape_control("gpu0 — H200 µs"), Cow::Borrowed(_)));
    }

    #[test]
    fn markdown_markup_is_escaped_and_identifiers_pass() {
        for id in [
            "p2p_cold_1drive_gpu0_gbps",
            "gpu0/h2d/cuda-copy/local/4MiB/s1",
            "0000:41:00.0",
            "NVIDIA H200",
            "numa-local",
            "write/target",
        ] {
            assert!(matches!(escape_markdown(id), Cow::Borrowed(_)), "{id}");
        }
        assert_eq!(escape_markdown("a|b"), "a\\|b");
        assert_eq!(escape_markdown("# heading"), "\\# heading");
        assert_eq!(escape_markdown("x\n# heading"), "x\\n# heading");
        assert_eq!(
            escape_markdown("<script>*b* _i_ `c` [l](u)"),
            "\\<script\\>\\*b\\* \\_i\\_ \\`c\\` \\[l\\](u)"
        );
        assert_eq!(escape_markdown("a\\b"), "a\\\\b");
        assert_eq!(escape_markdown("-1"), "\\-1");
    }

    #[test]
    fn every_string_of_a_value_is_escaped_keys_too() {
        use std::collections::BTreeMap;
        let mut m: BTreeMap<String, Vec<(String, f64)>> = BTreeMap::new();
        m.insert(
            "k|1".into(),
            vec![("a\u{1b}".into(), f64::NAN), ("ok".into(), 1.5)],
        );
        let e = escape_strings(&m, escape_markdown).unwrap();
        let v = &e["k\\|1"];
        assert_eq!(v[0].0, "a\\e");
        assert!(v[0].1.is_nan(), "NaN survives");
        assert_eq!(v[1], ("ok".to_string(), 1.5));
    }
}

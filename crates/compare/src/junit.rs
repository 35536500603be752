//! JUnit XML for CI systems: one `<testsuite>` per qualify run, one `<testcase>` per check, a
//! `<failure>` or `<skipped>` element where it did not pass. A `<failure>`'s `type` is the
//! check's [`FailureKind`](crate::qualify::FailureKind) (`below-floor`, `missing-in-profile`,
//! `not-comparable`, …; `docs/qualify-spec.md` lists them); its `message` and text are the
//! detail. Every attribute value and text is escaped with [`escape`].

use crate::qualify::{Group, Outcome, QualifyReport};
use std::fmt::Write;

/// Escape text for an XML attribute or element, dropping characters XML 1.0 cannot hold.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\t' | '\n' | '\r' => out.push(c),
            c if (c as u32) < 0x20 || c == '\u{FFFE}' || c == '\u{FFFF}' => {}
            c => out.push(c),
        }
    }
    out
}

/// The report as a JUnit XML document.
pub fn render(r: &QualifyReport) -> String {
    let mut s = String::new();
    let _ = writeln!(s, r#"<?xml version="1.0" encoding="UTF-8"?>"#);
    let _ = writeln!(
        s,
        r#"<testsuites name="hwceiling qualify" tests="{}" failures="{}" skipped="{}" errors="0">"#,
        r.checks.len(),
        r.failed,
        r.skipped
    );
    let _ = writeln!(
        s,
        r#"  <testsuite name="{}" tests="{}" failures="{}" skipped="{}" errors="0" hostname="{}" timestamp="{}">"#,
        escape(&r.spec),
        r.checks.len(),
        r.failed,
        r.skipped,
        escape(r.hostname.as_deref().unwrap_or("unknown")),
        escape(&r.measured_at)
    );
    let _ = writeln!(s, "    <properties>");
    let _ = writeln!(
        s,
        r#"      <property name="profile" value="{}"/>"#,
        escape(&r.profile)
    );
    let _ = writeln!(s, "    </properties>");
    for c in &r.checks {
        let class = match c.group {
            Group::Rule => "hwceiling.qualify.rule",
            Group::Link => "hwceiling.qualify.link",
            Group::Pcie => "hwceiling.qualify.pcie",
        };
        let open = format!(
            r#"    <testcase classname="{class}" name="{}" time="0""#,
            escape(&c.name)
        );
        match c.outcome {
            Outcome::Pass => {
                let _ = writeln!(s, "{open}>");
                let _ = writeln!(s, "      <system-out>{}</system-out>", escape(&c.detail));
                let _ = writeln!(s, "    </testcase>");
            }
            Outcome::Fail(kind) => {
                let _ = writeln!(s, "{open}>");
                let _ = writeln!(
                    s,
                    r#"      <failure message="{0}" type="{1}">{0}</failure>"#,
                    escape(&c.detail),
                    escape(kind.as_str())
                );
                let _ = writeln!(s, "    </testcase>");
            }
            Outcome::Skip => {
                let _ = writeln!(s, "{open}>");
                let _ = writeln!(s, r#"      <skipped message="{}"/>"#, escape(&c.detail));
                let _ = writeln!(s, "    </testcase>");
            }
        }
    }
    let _ = writeln!(s, "  </testsuite>");
    let _ = writeln!(s, "</testsuites>");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping_keeps_xml_well_formed() {
        assert_eq!(
            escape(r#"a<b & "c" 'd'>"#),
            "a&lt;b &amp; &quot;c&quot; &apos;d&apos;&gt;"
        );
        assert_eq!(escape("bell\u{7}tab\t"), "belltab\t");
    }
}

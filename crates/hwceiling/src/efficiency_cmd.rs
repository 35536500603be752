//! `hwceiling efficiency`: measured / ceiling for one path, from a profile file or from the
//! daemon (`hwceiling serve`) over its Unix socket.

use crate::cli::Format;
use anyhow::{bail, Context, Result};
use clap::Args;
use hwc_daemon::client::{self, Target};
use hwc_model::text::{escape_control, escape_strings, fixed};
use serde_json::{json, Value};
use std::path::PathBuf;
use std::time::Duration;

#[derive(Args, Debug)]
pub struct EfficiencyArgs {
    /// The ceiling key (e.g. `warm_gpu0_peak_gbps`; the profile's `ceilings:`, `profile`'s closing lines or GET /v1/ceilings list them).
    #[arg(long, value_name = "KEY")]
    pub path: String,
    /// What your workload measured on that path, in GB/s (10^9 bytes/s).
    #[arg(long, value_name = "GBPS", value_parser = parse_measured, allow_hyphen_values = true)]
    pub measured_gbps: f64,
    /// Read this profile instead of asking the daemon.
    #[arg(long, value_name = "FILE", conflicts_with = "socket")]
    pub profile: Option<PathBuf>,
    /// The daemon's socket (default: $XDG_RUNTIME_DIR/hwceiling.sock, else
    /// /run/hwceiling/hwceiling.sock).
    #[arg(long, value_name = "PATH")]
    pub socket: Option<PathBuf>,
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
}

fn parse_measured(s: &str) -> Result<f64, String> {
    hwc_compare::efficiency::parse_measured(s).map_err(|e| e.to_string())
}

/// The answer as the daemon gives it: the efficiency fields plus `profile`.
fn from_file(a: &EfficiencyArgs, file: &std::path::Path) -> Result<Value> {
    let p = hwc_profile::read_profile(file)?;
    let e = hwc_compare::efficiency::efficiency_in(&p, &a.path, a.measured_gbps)
        .with_context(|| file.display().to_string())?;
    let mut v = serde_json::to_value(&e)?;
    let mut m = hwc_daemon::completeness_fields(&hwc_model::profile::Completeness::of(&p));
    for (k, val) in [
        ("file", json!(file.display().to_string())),
        (
            "hostname",
            json!(p.platform.hostname.or(p.provenance.hostname)),
        ),
        ("finished_at", json!(p.provenance.finished_at)),
        ("schema_version", json!(p.schema_version)),
    ] {
        m.insert(k.into(), val);
    }
    v["profile"] = Value::Object(m);
    Ok(v)
}

/// The daemon's refusal in one line: its message, and for an unknown ceiling the ceilings the
/// profile served has (or that it has none), as the `--profile` route words it.
fn daemon_error(msg: &str, known_paths: Option<&Vec<Value>>) -> String {
    match known_paths {
        Some(known) => {
            let names: Vec<&str> = known.iter().filter_map(Value::as_str).collect();
            if names.is_empty() {
                format!("{msg} (known: none: the profile has no bandwidth ceilings)")
            } else {
                format!("{msg} (known: {})", names.join(", "))
            }
        }
        None => msg.to_string(),
    }
}

fn from_daemon(a: &EfficiencyArgs) -> Result<Value> {
    let socket = a
        .socket
        .clone()
        .unwrap_or_else(hwc_daemon::default_socket_path);
    let target = Target::Unix(socket);
    let query = format!(
        "/v1/efficiency?path={}&measured_gbps={}",
        client::encode_query_value(&a.path),
        a.measured_gbps
    );
    let r = client::get_json(&target, &query, Duration::from_secs(10))?;
    let v: Value = serde_json::from_slice(&r.body)
        .with_context(|| format!("the daemon at {target} answered {}: {}", r.status, r.text()))?;
    if r.status != 200 {
        let msg = v["error"].as_str().unwrap_or("no error message");
        bail!("{}", daemon_error(msg, v["known_paths"].as_array()))
    }
    Ok(v)
}

pub fn run(a: &EfficiencyArgs) -> Result<i32> {
    let v = match &a.profile {
        Some(file) => from_file(a, file)?,
        None => from_daemon(a)?,
    };
    let text = match a.format {
        Format::Json => serde_json::to_string_pretty(&v)? + "\n",
        Format::Yaml => serde_saphyr::to_string(&v).context("serialising to YAML")?,
        // Strings from a profile or a daemon may hold anything: made inert for a terminal.
        Format::Text => render_text(&escape_strings(&v, escape_control)?),
    };
    crate::out::print(&text)?;
    Ok(0)
}

/// The text answer, from the JSON fields of the answer (as the daemon sends them) and the
/// profile it came from. The ceiling's line says where it comes from: its measurement's median
/// with spread and N, or how it was derived; under the profile's line, the daemon's note on it
/// (a quick, interrupted or narrowed profile served for want of a complete one, or a newer one
/// passed over).
fn render_text(v: &serde_json::Value) -> String {
    let num = |k: &str| v[k].as_f64().unwrap_or(f64::NAN);
    let p = &v["profile"];
    // The daemon's `ceiling_source`, read as the type it was written from.
    use hwc_compare::Source;
    let src: Option<Source> = serde_json::from_value(v["ceiling_source"].clone()).ok();
    let source = match src {
        Some(Source::Measured {
            measurement,
            spread_pct,
            n,
        }) => format!(
            "median of {measurement}, ±{} %, N={n}",
            fixed(spread_pct, 1)
        ),
        Some(Source::Derived { how: Some(how), .. }) => format!("derived: {how}"),
        Some(Source::Derived { how: None, .. }) => "derived from measured medians".into(),
        Some(Source::Unknown) => "unknown: the profile's ceiling_records do not say".into(),
        None => "not given (a daemon older than this client): spread and N unknown".into(),
    };
    let mut s = format!(
        "efficiency  {}  ({} GB/s of the {} GB/s ceiling)\npath        {}\nceiling     {}\nprofile     {} ({}, finished {})\n",
        fixed(num("efficiency"), 3),
        fixed(num("measured_gbps"), 2),
        fixed(num("ceiling_gbps"), 2),
        v["path"].as_str().unwrap_or(""),
        source,
        p["file"].as_str().unwrap_or("?"),
        p["hostname"].as_str().unwrap_or("unknown host"),
        p["finished_at"].as_str().unwrap_or("?"),
    );
    if let Some(note) = p["note"].as_str() {
        s.push_str(&format!("            {note}\n"));
    }
    if let Some(note) = v["note"].as_str() {
        s.push_str(&format!("note        {note}\n"));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_daemon_refusal_names_the_known_ceilings_or_says_there_are_none() {
        let msg = "unknown ceiling `x_gbps` in hardware_profile_2026-11-29.yaml";
        let known = vec![json!("a_gbps"), json!("b_gbps")];
        assert_eq!(
            daemon_error(msg, Some(&known)),
            format!("{msg} (known: a_gbps, b_gbps)")
        );
        assert_eq!(
            daemon_error(msg, Some(&vec![])),
            format!("{msg} (known: none: the profile has no bandwidth ceilings)")
        );
        assert_eq!(daemon_error("no profile", None), "no profile");
    }

    #[test]
    fn the_daemons_note_on_the_profile_follows_the_profile_line() {
        let mut v = json!({
            "path": "warm_gpu0_peak_gbps", "measured_gbps": 27.5, "ceiling_gbps": 55.0,
            "efficiency": 0.5, "ceiling_source": {"kind": "derived"},
            "profile": {"file": "hardware_profile_2026-11-29.yaml", "hostname": "n",
                        "finished_at": "2026-11-29T12:00:00+00:00"},
        });
        let plain = render_text(&v);
        assert_eq!(plain.lines().count(), 4, "{plain}");
        v["profile"]["note"] =
            "newer hardware_profile_2026-11-29-2.yaml not served: a --quick run".into();
        let text = render_text(&v);
        let lines: Vec<&str> = text.lines().collect();
        assert!(
            lines[3].starts_with("profile     hardware_profile_2026-11-29.yaml"),
            "{text}"
        );
        assert_eq!(
            lines[4],
            "            newer hardware_profile_2026-11-29-2.yaml not served: a --quick run"
        );
    }
}

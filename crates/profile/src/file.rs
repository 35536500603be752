//! Reading profile (and other small YAML) files with a size cap, so a huge or endless input is
//! refused before it is parsed, and every failure names the file in one line.

use crate::{from_yaml, ProfileError};
use hwc_model::Profile;
use std::io::Read;
use std::path::{Path, PathBuf};

/// The largest file `read_profile` accepts. A full profile of an eight-GPU node is well under
/// a megabyte; anything this large is not one.
pub const MAX_PROFILE_BYTES: u64 = 16 << 20;

#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("cannot read {}: {err}", path.display())]
    Io { path: PathBuf, err: std::io::Error },
    #[error("{}: larger than {max_bytes} bytes: not an hwceiling file", path.display())]
    TooLarge { path: PathBuf, max_bytes: u64 },
    #[error("{}: not UTF-8 text", path.display())]
    NotText { path: PathBuf },
    #[error("{}: {err}", path.display())]
    Invalid { path: PathBuf, err: ProfileError },
}

/// The parser limits every hwceiling YAML input is read with: serde-saphyr's default budget
/// (nesting depth, node and event counts, duplicate keys refused), with anchors and aliases
/// held to a few — hwceiling never writes them, and a "billion laughs" file must fail at once.
pub fn yaml_options() -> serde_saphyr::Options {
    serde_saphyr::options! {
        budget: serde_saphyr::budget! {
            max_anchors: 64,
            max_aliases: 64,
        },
        alias_limits: serde_saphyr::alias_limits! {
            max_total_replayed_events: 10_000,
        },
    }
}

/// A YAML reader's error as one line in the words of someone editing the file: where it is and
/// what is wrong, never the parser's own option names (`DuplicateKeyPolicy`) or debug output
/// (`Nodes { nodes: 250001 }`).
pub fn yaml_message(e: &serde_saphyr::Error) -> String {
    use serde_saphyr::budget::BudgetBreach as B;
    use serde_saphyr::Error as E;
    let mut inner = e;
    while let E::WithSnippet { error, .. } | E::AliasError { error, .. } = inner {
        inner = error;
    }
    let at = inner
        .location()
        .filter(|l| l.line() > 0)
        .map(|l| format!("line {} column {}: ", l.line(), l.column()))
        .unwrap_or_default();
    let too = |what: &str| {
        format!("{at}too {what} for an hwceiling file (a profile or spec this large is not one)")
    };
    match inner {
        E::DuplicateMappingKey { key: Some(k), .. } => {
            format!("{at}the key `{k}` appears twice in one mapping: keep one of them")
        }
        E::DuplicateMappingKey { key: None, .. } => {
            format!("{at}a key appears twice in one mapping: keep one of them")
        }
        E::Budget { breach, .. } => match breach {
            // The count is the one that went past the limit.
            B::Nodes { nodes } => too(&format!("many values (over {})", nodes.saturating_sub(1))),
            B::Events { events } => too(&format!(
                "many YAML elements (over {})",
                events.saturating_sub(1)
            )),
            B::Depth { depth } => too(&format!("deeply nested ({depth} levels)")),
            B::Aliases { .. } | B::AliasAnchorRatio { .. } => {
                format!("{at}too many aliases (`*name`): hwceiling files use none")
            }
            B::Anchors { .. } => {
                format!("{at}too many anchors (`&name`): hwceiling files use none")
            }
            B::Documents { .. } => format!("{at}more than one YAML document (`---`): keep one"),
            B::ScalarBytes { .. } => too("much text"),
            B::MergeKeys { .. } => {
                format!("{at}too many merge keys (`<<`): hwceiling files use none")
            }
            _ => format!(
                "{at}not a well-formed hwceiling file (its structure is unbalanced or too large)"
            ),
        },
        _ => {
            let msg = e.to_string();
            let line = msg.lines().next().unwrap_or(&msg);
            line.trim_start_matches("error: ").to_string()
        }
    }
}

/// The text of `path`, refusing more than `max_bytes` (checked while reading, so a file that
/// grows or a FIFO cannot get past it).
pub fn read_text_capped(path: &Path, max_bytes: u64) -> Result<String, ReadError> {
    let io = |err| ReadError::Io {
        path: path.to_path_buf(),
        err,
    };
    let file = std::fs::File::open(path).map_err(io)?;
    let mut bytes = Vec::new();
    file.take(max_bytes.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(io)?;
    if bytes.len() as u64 > max_bytes {
        return Err(ReadError::TooLarge {
            path: path.to_path_buf(),
            max_bytes,
        });
    }
    String::from_utf8(bytes).map_err(|_| ReadError::NotText {
        path: path.to_path_buf(),
    })
}

/// Read and parse a profile file; the text comes back too (to serve it byte for byte).
pub fn read_profile_with_text(path: &Path) -> Result<(Profile, String), ReadError> {
    let text = read_text_capped(path, MAX_PROFILE_BYTES)?;
    let profile = from_yaml(&text).map_err(|err| ReadError::Invalid {
        path: path.to_path_buf(),
        err,
    })?;
    Ok((profile, text))
}

/// Read and parse a profile file.
pub fn read_profile(path: &Path) -> Result<Profile, ReadError> {
    read_profile_with_text(path).map(|(p, _)| p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn oversized_files_are_refused_before_parsing() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("big.yaml");
        std::fs::write(&p, "a".repeat(100)).unwrap();
        let e = read_text_capped(&p, 99).unwrap_err().to_string();
        assert!(e.contains("larger than 99 bytes"), "{e}");
        assert_eq!(read_text_capped(&p, 100).unwrap().len(), 100);
    }

    #[test]
    fn a_billion_laughs_is_refused_at_once() {
        let mut text = String::from("schema_version: 1\nl0: &l0 [x, x, x, x]\n");
        for i in 1..40 {
            let p = format!("*l{}", i - 1);
            text.push_str(&format!("l{i}: &l{i} [{p}, {p}, {p}, {p}]\n"));
        }
        let t = std::time::Instant::now();
        let e = from_yaml(&text).unwrap_err().to_string();
        assert!(e.contains("alias replay limit exceeded"), "{e}");
        assert!(
            t.elapsed() < std::time::Duration::from_secs(1),
            "{:?}",
            t.elapsed()
        );
    }

    #[test]
    fn parser_words_do_not_reach_the_user() {
        let e = from_yaml("schema_version: 1\nschema_version: 1\nwarnings: []\n")
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "not a valid hwceiling profile: line 2 column 1: the key `schema_version` appears \
             twice in one mapping: keep one of them"
        );
        let mut big = String::from("schema_version: 1\nwarnings: []\nx:\n");
        big.push_str(&" - 1\n".repeat(260_000));
        let e = from_yaml(&big).unwrap_err().to_string();
        assert!(
            e.contains("line 249997 column 4: too many values (over 250000) for an hwceiling file"),
            "{e}"
        );
        let deep = format!(
            "schema_version: 1\nwarnings: []\nx: {}{}",
            "[".repeat(100),
            "]".repeat(100)
        );
        let e = from_yaml(&deep).unwrap_err().to_string();
        assert!(e.contains("too deeply nested"), "{e}");
        assert!(!e.contains("budget") && !e.contains('{'), "{e}");
    }

    #[test]
    fn errors_name_the_file_on_one_line() {
        let d = tempfile::tempdir().unwrap();
        let missing = d.path().join("none.yaml");
        let e = read_profile(&missing).unwrap_err().to_string();
        assert!(
            e.starts_with("cannot read ") && e.contains("none.yaml"),
            "{e}"
        );
        let bad = d.path().join("bad.yaml");
        std::fs::write(&bad, "schema_version: 1\nplatform: [\n").unwrap();
        let e = read_profile(&bad).unwrap_err().to_string();
        assert!(e.contains("bad.yaml: not a valid hwceiling profile"), "{e}");
        assert!(!e.contains('\n'), "{e}");
        let binary = d.path().join("bin.yaml");
        std::fs::write(&binary, [0xff, 0xfe, 0x00]).unwrap();
        let e = read_profile(&binary).unwrap_err().to_string();
        assert!(e.contains("not UTF-8"), "{e}");
    }

    fn sample_profile_yaml() -> String {
        let mut topo = hwc_model::Topology::default();
        topo.platform.hostname = Some("node7".into());
        let mut p = crate::build(
            &topo,
            &hwc_model::Plan::default(),
            &[],
            &[],
            &[],
            &[],
            hwc_model::Provenance {
                tool: "hwceiling".into(),
                finished_at: "2026-11-29T10:00:00+00:00".into(),
                ..hwc_model::Provenance::default()
            },
        );
        p.ceilings.insert("warm_gpu0_gbps".into(), 53.4);
        p.ceilings.insert("host_ram_same_numa_gbps".into(), 34.7);
        p.warnings.push(hwc_model::WarningKind::Interrupted.into());
        crate::to_yaml(&p).unwrap()
    }

    #[test]
    fn a_profile_cut_short_before_its_last_field_is_refused_wherever_it_is_cut() {
        let good = sample_profile_yaml();
        assert!(from_yaml(&good).is_ok());
        let last = good
            .find("\nwarnings:")
            .expect("warnings is the last field")
            + 1;
        // Nothing but its list items after it.
        assert!(
            good[last..]
                .lines()
                .skip(1)
                .all(|l| l.starts_with("- ") || l.starts_with("  ")),
            "{good}"
        );
        // Every cut before it: at each line break, and inside each line.
        let mut cuts = 0;
        for end in (0..last).filter(|&i| good.is_char_boundary(i)) {
            let e = from_yaml(&good[..end]).map(|_| ()).unwrap_err();
            // Cut before its version is whole, it is no profile at all.
            let versioned = good[..end].contains("schema_version: 2\n");
            if good[..end].ends_with('\n') && versioned {
                assert!(matches!(e, ProfileError::CutShort), "{end}: {e}");
                cuts += 1;
            }
        }
        assert!(cuts > 20, "{cuts}");
    }
}

//! `hwceiling engines`: this build's engines, what each measures and needs, and whether it can
//! run on this machine (from its declaration and its probe, as the planner judges it).

use crate::cli::Format;
use anyhow::Result;
use clap::Args;
use hwc_model::PathId;
use serde::Serialize;
use std::fmt::Write;

#[derive(Args, Debug)]
pub struct EnginesArgs {
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
}

/// One engine as listed: its declaration, and why it cannot run here (`None`: it can).
#[derive(Debug, Serialize)]
struct Listed {
    #[serde(flatten)]
    decl: hwc_model::EngineDecl,
    blocked: Option<String>,
}

pub fn run(a: &EnginesArgs) -> Result<i32> {
    let mut topo = hwc_session::detect(None)?;
    let status = hwc_session::engines::statuses(&mut topo, &|_: PathId| true, None);
    let root = hwc_session::is_root();
    let listed: Vec<Listed> = status
        .iter()
        .map(|e| Listed {
            decl: e.decl.clone(),
            blocked: hwc_plan::engine_blocked(&topo, root, e).map(|(reason, hint)| match hint {
                Some(h) => format!("{reason} ({h})"),
                None => reason,
            }),
        })
        .collect();
    let text = match a.format {
        Format::Text => render(&listed),
        Format::Json => serde_json::to_string_pretty(&listed)? + "\n",
        Format::Yaml => serde_saphyr::to_string(&listed)?,
    };
    crate::out::print(&text)?;
    Ok(0)
}

fn render(listed: &[Listed]) -> String {
    let mut s = String::new();
    for l in listed {
        let d = &l.decl;
        let paths: Vec<&str> = d.paths.iter().map(|p| p.as_str()).collect();
        let _ = writeln!(s, "{}  {}", d.id, d.title);
        let _ = writeln!(s, "    paths    {}", paths.join(", "));
        let mut needs: Vec<String> = Vec::new();
        let n = &d.needs;
        for (yes, what) in [
            (n.root, "root"),
            (n.gpu, "an NVIDIA GPU"),
            (n.vfio, "drives bound to vfio-pci"),
            (n.writes_devices, "writes devices (through the write gate)"),
        ] {
            if yes {
                needs.push(what.into());
            }
        }
        needs.extend(n.libraries.iter().map(|l| l.name.clone()));
        let needs = if needs.is_empty() {
            "nothing".to_string()
        } else {
            needs.join(", ")
        };
        let _ = writeln!(s, "    needs    {needs}");
        let mut kind = vec![if d.default_on {
            "on by default"
        } else {
            "only with --engines"
        }];
        if !d.hardware {
            kind.push("measures the tool itself: never a ceiling");
        }
        let _ = writeln!(s, "    runs     {}", kind.join("; "));
        let here = l.blocked.as_deref().unwrap_or("can run");
        let _ = writeln!(s, "    here     {here}\n");
    }
    s
}

//! Every chart of the fixture results, opened in a real browser: headless Chromium takes a
//! screenshot of each SVG, and the screenshot must not be blank (enough pixels that are not the
//! background, in several colours), so an empty, broken or unrenderable chart fails.
//!
//! Needs Chromium (Debian: `apt-get install -y chromium`; another binary with `HWC_CHROMIUM`).
//! Without it the test says that it skipped and why. With `HWC_CHART_SCREENSHOTS=DIR` the SVGs
//! and their screenshots are kept in DIR, to look at.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

fn chromium() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("HWC_CHROMIUM") {
        return Some(PathBuf::from(p));
    }
    let path = std::env::var_os("PATH")?;
    ["chromium", "chromium-browser", "google-chrome"]
        .iter()
        .flat_map(|name| std::env::split_paths(&path).map(move |d| d.join(name)))
        .find(|p| p.is_file())
}

/// The SVG's own size, from its root element.
fn size_of(svg: &str) -> (u32, u32) {
    let doc = roxmltree::Document::parse(svg).expect("well-formed SVG");
    let r = doc.root_element();
    let px = |a: &str| {
        r.attribute(a)
            .and_then(|v| v.trim_end_matches("px").parse::<f64>().ok())
            .map_or(800, |v| v.ceil() as u32)
    };
    (px("width"), px("height"))
}

fn screenshot(browser: &Path, svg_path: &Path, png: &Path, (w, h): (u32, u32), profile: &Path) {
    let out = Command::new(browser)
        .args([
            "--headless",
            "--disable-gpu",
            "--no-sandbox",
            "--hide-scrollbars",
            "--no-first-run",
            &format!("--user-data-dir={}", profile.display()),
            &format!("--screenshot={}", png.display()),
            &format!("--window-size={w},{h}"),
            &format!("file://{}", svg_path.display()),
        ])
        .output()
        .expect("chromium starts");
    assert!(
        png.is_file(),
        "no screenshot of {} ({}): {}",
        svg_path.display(),
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The share of pixels that are not white, and how many colours (to 4 bits a channel) are
/// drawn on more than a few pixels.
fn ink(png_path: &Path) -> (f64, usize) {
    let decoder = png::Decoder::new(std::io::BufReader::new(
        std::fs::File::open(png_path).unwrap(),
    ));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).unwrap();
    let channels = info.color_type.samples();
    let px = &buf[..info.buffer_size()];
    let mut colours = std::collections::HashMap::<[u8; 3], usize>::new();
    let mut inked = 0usize;
    let total = (info.width * info.height) as usize;
    for p in px.chunks(channels) {
        let rgb = if channels >= 3 {
            [p[0], p[1], p[2]]
        } else {
            [p[0]; 3]
        };
        if rgb.iter().any(|&c| c < 235) {
            inked += 1;
        }
        *colours.entry(rgb.map(|c| c >> 4)).or_default() += 1;
    }
    let drawn = colours.values().filter(|&&n| n > 20).count();
    (inked as f64 / total as f64, drawn)
}

fn not_blank(png: &Path) -> Result<(), String> {
    let (share, colours) = ink(png);
    if share < 0.02 || colours < 5 {
        return Err(format!(
            "{} looks blank: {:.2} % of its pixels drawn, {colours} colours",
            png.display(),
            share * 100.0
        ));
    }
    Ok(())
}

#[test]
fn every_chart_renders_in_chromium_and_is_not_blank() {
    let Some(browser) = chromium() else {
        eprintln!(
            "SKIPPED: no chromium on PATH (Debian: apt-get install -y chromium, or set \
             HWC_CHROMIUM): the charts were not rendered in a browser"
        );
        return;
    };
    let temp = tempfile::tempdir().unwrap();
    let dir = match std::env::var_os("HWC_CHART_SCREENSHOTS") {
        Some(d) => {
            std::fs::create_dir_all(&d).unwrap();
            PathBuf::from(d)
        }
        None => temp.path().to_path_buf(),
    };
    let profile = temp.path().join("chromium-profile");

    // The check itself: a blank page is found blank.
    let blank = dir.join("blank.svg");
    std::fs::write(
        &blank,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="400" height="300"><rect width="400" height="300" fill="white"/></svg>"#,
    )
    .unwrap();
    let blank_png = dir.join("blank.png");
    screenshot(&browser, &blank, &blank_png, (400, 300), &profile);
    assert!(not_blank(&blank_png).is_err(), "a blank page passed");

    let charts = hwc_charts::all(&common::h200_with_drives()).unwrap();
    assert!(charts.len() >= 8, "{} charts", charts.len());
    let mut failed = Vec::new();
    for c in &charts {
        let svg = dir.join(c.file_name());
        std::fs::write(&svg, &c.svg).unwrap();
        let png = svg.with_extension("png");
        let _ = std::fs::remove_file(&png);
        screenshot(&browser, &svg, &png, size_of(&c.svg), &profile);
        if let Err(e) = not_blank(&png) {
            failed.push(e);
        }
    }
    assert!(failed.is_empty(), "{failed:#?}");
}

//! `hwceiling qualify`: a node bring-up gate. A spec (YAML, see `docs/qualify-spec.md`) names
//! paths with floors — absolute GB/s, a percentage of the PCIe link's theoretical bandwidth, or a
//! percentage of a baseline profile — and PCIe link checks (generation and width at their
//! maximum, or at least a given value). Every rule and every matched link is one pass/fail check.

use crate::method;
use crate::source::Source;
use hwc_model::text::fixed;
use hwc_model::topology::{LinkTheory, PciePath};
use hwc_model::Profile;
use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize};
use std::fmt::{self, Write};

/// The spec format version this build reads.
pub const SPEC_VERSION: u32 = 1;

/// The largest spec file accepted.
pub const MAX_SPEC_BYTES: u64 = 1 << 20;

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Spec {
    pub spec_version: u32,
    /// Names the JUnit test suite.
    #[serde(default)]
    pub name: Option<String>,
    /// A baseline profile for `min_pct_of_baseline`, relative to the spec file.
    #[serde(default)]
    pub baseline: Option<String>,
    #[serde(default)]
    pub rules: Vec<Rule>,
    #[serde(default)]
    pub links: Vec<LinkRule>,
    #[serde(default)]
    pub pcie: Vec<PcieRule>,
}

/// Settings of the PCIe path of each device matching `device`, as config space read them
/// (`topology.pcie_paths`; docs/pcie.md).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PcieRule {
    /// A device of `topology.pcie_paths` (`gpu0`, `nvme1`), `*` matching any run of characters.
    pub device: String,
    /// The smallest Max Payload Size set on the device's path, at least this many bytes.
    #[serde(default)]
    pub min_mps_bytes: Option<u32>,
    /// `false`: no bridge on the path redirects peer-to-peer requests (ACS P2P Request
    /// Redirect), so GPU ↔ drive traffic can cross a switch without the root complex.
    #[serde(default)]
    pub acs_redirect: Option<bool>,
    /// The device's IOMMU domain is one of these (`identity`, `DMA`, `DMA-FQ`, …; `none`: no
    /// IOMMU group).
    #[serde(default)]
    pub iommu: Option<Vec<String>>,
    /// `true`: no measurement that crossed the device's path saw a PCIe error counter rise (AER
    /// on any hop, the GPU's replay counter).
    #[serde(default)]
    pub no_link_errors: Option<bool>,
    /// When false, a pattern that matches no path is skipped instead of failed.
    #[serde(default = "yes")]
    pub required: bool,
}

impl Spec {
    /// The spec with each of its strings (names, paths, devices) passed through `f`: made inert
    /// for a terminal before a report of it is rendered.
    pub fn map_strings(mut self, f: impl Fn(&str) -> std::borrow::Cow<'_, str>) -> Spec {
        let g = |s: &mut String| *s = f(s).into_owned();
        self.name
            .iter_mut()
            .chain(self.baseline.iter_mut())
            .for_each(g);
        for r in &mut self.rules {
            r.name.iter_mut().chain(r.link.iter_mut()).for_each(g);
            g(&mut r.path);
        }
        self.links.iter_mut().for_each(|l| g(&mut l.device));
        for r in &mut self.pcie {
            g(&mut r.device);
            r.iommu.iter_mut().flatten().for_each(g);
        }
        self
    }
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    #[serde(default)]
    pub name: Option<String>,
    /// A ceiling key or a measurement key.
    pub path: String,
    #[serde(default)]
    pub min_gbps: Option<f64>,
    #[serde(default)]
    pub min_pct_of_link: Option<f64>,
    /// The device whose link `min_pct_of_link` refers to (default: the `gpuN`/`nvmeN` in the
    /// path, or the measurement's GPU).
    #[serde(default)]
    pub link: Option<String>,
    /// A host RAM figure measured with another copy kernel than the baseline's is not held
    /// to it: the check fails as not comparable (re-baseline).
    #[serde(default)]
    pub min_pct_of_baseline: Option<f64>,
    /// When false, a path absent from the profile is skipped instead of failed.
    #[serde(default = "yes")]
    pub required: bool,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinkRule {
    /// A device name of `topology.links` (`gpu0`, `nvme1`), `*` matching any run of characters.
    pub device: String,
    #[serde(default)]
    pub gen: Option<LinkTarget>,
    #[serde(default)]
    pub width: Option<LinkTarget>,
    /// When false, a pattern that matches no link is skipped instead of failed.
    #[serde(default = "yes")]
    pub required: bool,
}

fn yes() -> bool {
    true
}

/// `max` (equal to the device's maximum) or a number (at least this).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkTarget {
    Max,
    AtLeast(u32),
}

impl<'de> Deserialize<'de> for LinkTarget {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = LinkTarget;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("`max` or a positive whole number")
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<LinkTarget, E> {
                match s {
                    "max" => Ok(LinkTarget::Max),
                    _ => Err(E::invalid_value(de::Unexpected::Str(s), &self)),
                }
            }
            fn visit_u64<E: de::Error>(self, n: u64) -> Result<LinkTarget, E> {
                u32::try_from(n)
                    .ok()
                    .filter(|&n| n > 0)
                    .map(LinkTarget::AtLeast)
                    .ok_or_else(|| E::invalid_value(de::Unexpected::Unsigned(n), &self))
            }
            fn visit_i64<E: de::Error>(self, n: i64) -> Result<LinkTarget, E> {
                match u64::try_from(n) {
                    Ok(n) => self.visit_u64(n),
                    Err(_) => Err(E::invalid_value(de::Unexpected::Signed(n), &self)),
                }
            }
        }
        d.deserialize_any(V)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpecError {
    #[error("not a valid qualify spec: {0}")]
    Yaml(String),
    #[error("qualify spec_version {found} is not {SPEC_VERSION}, the one this hwceiling reads")]
    Version { found: u32 },
    #[error("qualify spec rule {index} (`{path}`): {problem}")]
    Rule {
        index: usize,
        path: String,
        problem: String,
    },
    #[error("qualify spec link check {index} (`{device}`): {problem}")]
    Link {
        index: usize,
        device: String,
        problem: String,
    },
    #[error("qualify spec PCIe check {index} (`{device}`): {problem}")]
    Pcie {
        index: usize,
        device: String,
        problem: String,
    },
    #[error("the spec has no rules, link checks or PCIe checks: it would pass any node")]
    Empty,
    #[error("{0} rule(s) use min_pct_of_baseline but no baseline profile was given (spec `baseline:` or --baseline)")]
    NoBaseline(usize),
}

/// Parse and check a spec.
pub fn parse_spec(text: &str) -> Result<Spec, SpecError> {
    let spec: Spec = serde_saphyr::from_str_with_options(text, hwc_profile::yaml_options())
        .map_err(|e| {
            // The reader's words for a duplicate key or an oversized file, not the parser's.
            SpecError::Yaml(hwc_profile::yaml_message(&e))
        })?;
    if spec.spec_version != SPEC_VERSION {
        return Err(SpecError::Version {
            found: spec.spec_version,
        });
    }
    if spec.rules.is_empty() && spec.links.is_empty() && spec.pcie.is_empty() {
        return Err(SpecError::Empty);
    }
    for (i, r) in spec.pcie.iter().enumerate() {
        if r.min_mps_bytes.is_none()
            && r.acs_redirect.is_none()
            && r.iommu.is_none()
            && r.no_link_errors.is_none()
        {
            return Err(SpecError::Pcie {
                index: i + 1,
                device: r.device.clone(),
                problem: "give min_mps_bytes, acs_redirect, iommu, no_link_errors or several"
                    .into(),
            });
        }
        if r.no_link_errors == Some(false) {
            return Err(SpecError::Pcie {
                index: i + 1,
                device: r.device.clone(),
                problem: "no_link_errors: false asks nothing; leave it out".into(),
            });
        }
    }
    for (i, r) in spec.rules.iter().enumerate() {
        let problem = |p: &str| SpecError::Rule {
            index: i + 1,
            path: r.path.clone(),
            problem: p.to_string(),
        };
        let floors = [r.min_gbps, r.min_pct_of_link, r.min_pct_of_baseline];
        match floors.iter().flatten().count() {
            1 => {}
            0 => {
                return Err(problem(
                    "give one floor: min_gbps, min_pct_of_link or min_pct_of_baseline",
                ))
            }
            _ => {
                return Err(problem(
                    "give only one floor per rule (write two rules for two floors)",
                ))
            }
        }
        if floors
            .iter()
            .flatten()
            .any(|v| !(v.is_finite() && *v >= 0.0))
        {
            return Err(problem("the floor must be a finite, non-negative number"));
        }
        if r.path.trim().is_empty() {
            return Err(problem("the path is empty"));
        }
        if r.link.is_some() && r.min_pct_of_link.is_none() {
            return Err(problem("`link` only goes with min_pct_of_link"));
        }
    }
    for (i, l) in spec.links.iter().enumerate() {
        if l.gen.is_none() && l.width.is_none() {
            return Err(SpecError::Link {
                index: i + 1,
                device: l.device.clone(),
                problem: "give gen, width or both (`max` or a minimum)".into(),
            });
        }
    }
    Ok(spec)
}

impl Spec {
    /// How many rules need a baseline profile.
    pub fn baseline_rules(&self) -> usize {
        self.rules
            .iter()
            .filter(|r| r.min_pct_of_baseline.is_some())
            .count()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Group {
    Rule,
    Link,
    Pcie,
}

/// Why a check failed. Its name ([`FailureKind::as_str`]) is the JUnit `<failure type="…">`
/// and the JSON/YAML `failure` field; the names are stable (CI systems triage on them) and
/// documented in `docs/qualify-spec.md`. Only [`BelowFloor`](FailureKind::BelowFloor) (a figure
/// under its floor) and [`LinkBelowTarget`](FailureKind::LinkBelowTarget) (a link short of its
/// generation or width) say that something was read and falls short; every other kind says why
/// no such comparison could be made, and a gate does not pass what it cannot confirm.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FailureKind {
    /// `below-floor`: the profile's figure is under the rule's floor.
    BelowFloor,
    /// `missing-in-profile`: a required rule's path is not among the profile's ceilings or
    /// measurements.
    MissingInProfile,
    /// `missing-in-baseline`: a `min_pct_of_baseline` rule's path is not in the baseline profile.
    MissingInBaseline,
    /// `not-comparable`: a `min_pct_of_baseline` rule on a host RAM figure measured with another
    /// copy kernel than the baseline's; re-baseline.
    NotComparable,
    /// `no-device`: a `min_pct_of_link` rule whose path names no device and that gives no `link:`.
    NoDevice,
    /// `no-link`: the profile records no PCIe link for the device a `min_pct_of_link` rule uses.
    NoLink,
    /// `no-floor`: the rule gives no floor (a spec not checked by [`parse_spec`]).
    NoFloor,
    /// `link-below-target`: a link check's generation or width is below the one required
    /// (below the device's maximum for `max`, or below the number given).
    LinkBelowTarget,
    /// `max-unknown`: a `max` link check on a device whose maximum generation or width the
    /// profile does not record: it cannot be confirmed.
    MaxUnknown,
    /// `no-matching-link`: a required link check's pattern matches no link of the profile.
    NoMatchingLink,
    /// `pcie-setting`: a PCIe path's setting, as config space read it, is not the one required
    /// (an MPS below the minimum, ACS redirect on where it must be off, another IOMMU domain).
    PcieSetting,
    /// `pcie-unreadable`: the setting could not be read (config space past its header needs
    /// root): it cannot be confirmed.
    PcieUnreadable,
    /// `link-errors`: a measurement that crossed the device's path saw an AER counter or the
    /// GPU's PCIe replay counter rise.
    LinkErrors,
    /// `not-finite`: the figure, or the floor computed from a baseline or link, is not a finite
    /// number (a figure read from a file cannot be one, a profile built in code can hold one;
    /// a floor can overflow, e.g. a huge percentage of a huge baseline).
    NotFinite,
}

impl FailureKind {
    /// Every kind, in the order of the documentation.
    pub const ALL: [FailureKind; 14] = [
        FailureKind::BelowFloor,
        FailureKind::MissingInProfile,
        FailureKind::MissingInBaseline,
        FailureKind::NotComparable,
        FailureKind::NoDevice,
        FailureKind::NoLink,
        FailureKind::NoFloor,
        FailureKind::LinkBelowTarget,
        FailureKind::MaxUnknown,
        FailureKind::NoMatchingLink,
        FailureKind::PcieSetting,
        FailureKind::PcieUnreadable,
        FailureKind::LinkErrors,
        FailureKind::NotFinite,
    ];

    /// The stable name: JUnit's `<failure type>`, JSON/YAML's `failure`.
    pub fn as_str(self) -> &'static str {
        match self {
            FailureKind::BelowFloor => "below-floor",
            FailureKind::MissingInProfile => "missing-in-profile",
            FailureKind::MissingInBaseline => "missing-in-baseline",
            FailureKind::NotComparable => "not-comparable",
            FailureKind::NoDevice => "no-device",
            FailureKind::NoLink => "no-link",
            FailureKind::NoFloor => "no-floor",
            FailureKind::LinkBelowTarget => "link-below-target",
            FailureKind::MaxUnknown => "max-unknown",
            FailureKind::NoMatchingLink => "no-matching-link",
            FailureKind::PcieSetting => "pcie-setting",
            FailureKind::PcieUnreadable => "pcie-unreadable",
            FailureKind::LinkErrors => "link-errors",
            FailureKind::NotFinite => "not-finite",
        }
    }
}

impl fmt::Display for FailureKind {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for FailureKind {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// A check's result; a failure says what kind it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Pass,
    Fail(FailureKind),
    Skip,
}

impl Outcome {
    /// `pass`, `fail` or `skip` (JSON/YAML's `outcome`).
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Pass => "pass",
            Outcome::Fail(_) => "fail",
            Outcome::Skip => "skip",
        }
    }

    /// The kind of failure; `None` for a pass or a skip.
    pub fn failure(self) -> Option<FailureKind> {
        match self {
            Outcome::Fail(k) => Some(k),
            _ => None,
        }
    }

    pub fn is_fail(self) -> bool {
        matches!(self, Outcome::Fail(_))
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Check {
    pub group: Group,
    pub name: String,
    pub outcome: Outcome,
    /// The profile's value (GB/s for rules).
    pub value: Option<f64>,
    /// The floor it was held to.
    pub floor: Option<f64>,
    /// Why, in words.
    pub detail: String,
}

/// As data: `group`, `name`, `outcome` (`pass`, `fail`, `skip`), `failure` (the
/// [`FailureKind`], only for a failed check), `value` and `floor` (when known), `detail`.
impl Serialize for Check {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut st = s.serialize_struct("Check", 7)?;
        st.serialize_field("group", &self.group)?;
        st.serialize_field("name", &self.name)?;
        st.serialize_field("outcome", self.outcome.as_str())?;
        match self.outcome.failure() {
            Some(k) => st.serialize_field("failure", &k)?,
            None => st.skip_field("failure")?,
        }
        match self.value {
            Some(v) => st.serialize_field("value", &v)?,
            None => st.skip_field("value")?,
        }
        match self.floor {
            Some(v) => st.serialize_field("floor", &v)?,
            None => st.skip_field("floor")?,
        }
        st.serialize_field("detail", &self.detail)?;
        st.end()
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct QualifyReport {
    pub spec: String,
    pub profile: String,
    pub hostname: Option<String>,
    /// The profile's `provenance.finished_at`.
    pub measured_at: String,
    pub checks: Vec<Check>,
    pub passed: usize,
    pub failed: usize,
    pub skipped: usize,
}

impl QualifyReport {
    pub fn ok(&self) -> bool {
        self.failed == 0
    }
}

/// A value the profile holds under `path`: a ceiling, else a measurement's median.
struct Found {
    value: f64,
    what: &'static str,
    /// Where the value comes from: the measurement's statistic, spread and count, or how it was
    /// derived from measured medians.
    source: String,
    /// Not itself one measurement's median.
    derived: bool,
    contended: bool,
    /// Is, or was derived from, a measurement that stayed over its spread limit.
    unsteady: bool,
    /// The device whose link it crosses, where it names one: its GPU, or its one drive.
    device: Option<String>,
    /// The engine it was measured with; `None` for derived figures.
    kernel: Option<String>,
}

/// A rule's path as `p` spells it: a measurement key written for version 1 profiles
/// (`h2d/gpu0/local/4MiB/s1`) names the same measurement in the current form
/// (`h2d/cuda-copy/gpu0/local/4MiB/s1`), where the profile has no figure under the old spelling.
fn in_profile<'a>(p: &Profile, path: &'a str) -> std::borrow::Cow<'a, str> {
    let known = |k: &str| p.ceilings.contains_key(k) || p.measurement(k).is_some();
    let failed = |k: &str| p.failures.iter().any(|f| f.key == k);
    if known(path) || failed(path) {
        return path.into();
    }
    match hwc_model::v1::upgrade_key(path) {
        Some(new) if known(&new) || failed(&new) => new.into(),
        _ => path.into(),
    }
}

fn find(p: &Profile, path: &str) -> Option<Found> {
    let path = &*in_profile(p, path);
    if let Some(&v) = p.ceilings.get(path) {
        // A ceiling that is one measurement's median carries that measurement's spread, count
        // and contention; a derived one says how it was computed and is contended when one of
        // its inputs was.
        let (source, contended) = Source::of_ceiling(p, path)?;
        return Some(Found {
            value: v,
            what: "ceiling",
            derived: !matches!(source, Source::Measured { .. }),
            source: source.phrase(),
            contended,
            unsteady: p.ceiling_source(path).is_some_and(|o| o.unsteady()),
            device: p.ceiling_meta(path).and_then(|m| m.gpu.clone()),
            kernel: method::of_ceiling(p, path).map(str::to_string),
        });
    }
    p.measurement(path).map(|m| Found {
        value: m.gbps.median,
        what: "measurement median",
        source: Source::of_measurement(m).phrase(),
        derived: false,
        contended: m.contended,
        unsteady: m.unsteady(),
        device: m
            .spec
            .gpu()
            .map(str::to_string)
            .or_else(|| match m.spec.nvme() {
                Some(n) if !n.target && n.drives.len() == 1 => Some(n.drives[0].clone()),
                _ => None,
            }),
        kernel: method::of_measurement(m).map(str::to_string),
    })
}

/// Why `path` has no figure, as far as the profile says: the case failed (its error), or it is
/// absent, with a pointer to the waivers and to the run's failures where there were any (a
/// ceiling's inputs may be among them).
fn missing_detail(p: &Profile, path: &str) -> String {
    let key = in_profile(p, path);
    if let Some(f) = p.failures.iter().find(|f| f.key == *key) {
        return format!("`{key}` failed in this run: {}", f.error);
    }
    let failed = match p.failures.len() {
        0 => String::new(),
        n => format!("; {n} case(s) of this run failed: see its `failures` list"),
    };
    format!(
        "`{path}` is not among the profile's ceilings or measurements (see its `waived` list{failed})"
    )
}

/// `*` matches any run of characters; everything else matches itself. In time linear in the
/// pattern times the name, whatever the stars (a spec is input: `********x` must not hang a
/// gate): the first piece is a prefix, the last a suffix, and each one between is taken at its
/// leftmost place after the one before, which loses no match since a star before it can
/// always take up the characters skipped.
pub fn glob(pattern: &str, name: &str) -> bool {
    let mut pieces = pattern.split('*');
    let first = pieces.next().unwrap_or_default();
    let Some(last) = pieces.next_back() else {
        return pattern == name; // no star
    };
    // The prefix and the suffix must not overlap: the suffix comes off what the prefix left.
    let Some(mut between) = name
        .strip_prefix(first)
        .and_then(|rest| rest.strip_suffix(last))
    else {
        return false;
    };
    for piece in pieces {
        match between.find(piece) {
            Some(at) => between = &between[at + piece.len()..],
            None => return false,
        }
    }
    true
}

fn fmt_gbps(v: f64) -> String {
    format!("{} GB/s", fixed(v, 2))
}

fn link_basis(l: &LinkTheory) -> (f64, String) {
    match (l.max_theoretical_gbps, l.max_gen, l.max_width) {
        (Some(t), Some(g), Some(w)) => (t, format!("Gen{g} x{w}")),
        (Some(t), _, _) => (t, "its maximum".to_string()),
        _ => (
            l.theoretical_gbps,
            format!(
                "Gen{} x{} (maximum unknown: the current link)",
                l.gen, l.width
            ),
        ),
    }
}

fn rule_name(r: &Rule) -> String {
    if let Some(n) = &r.name {
        return n.clone();
    }
    let floor = match (r.min_gbps, r.min_pct_of_link, r.min_pct_of_baseline) {
        (Some(g), _, _) => format!("{g} GB/s"),
        (_, Some(p), _) => format!(
            "{p}% of the {} link",
            r.link.clone().unwrap_or_else(|| "device's".into())
        ),
        (_, _, Some(p)) => format!("{p}% of baseline"),
        _ => String::new(),
    };
    format!("{} >= {floor}", r.path)
}

fn check_rule(p: &Profile, baseline: Option<&Profile>, r: &Rule) -> Check {
    let name = rule_name(r);
    let check = |outcome, value, floor, detail: String| Check {
        group: Group::Rule,
        name: name.clone(),
        outcome,
        value,
        floor,
        detail,
    };
    let Some(found) = find(p, &r.path) else {
        let detail = missing_detail(p, &r.path);
        return if r.required {
            check(
                Outcome::Fail(FailureKind::MissingInProfile),
                None,
                None,
                detail,
            )
        } else {
            check(Outcome::Skip, None, None, format!("{detail}; not required"))
        };
    };
    // NaN compares false either way and infinity passes every floor: neither is a reading.
    if !found.value.is_finite() {
        return check(
            Outcome::Fail(FailureKind::NotFinite),
            None,
            None,
            format!(
                "the profile's {} is not a finite number ({})",
                found.what, found.value
            ),
        );
    }
    let (floor, basis) = if let Some(g) = r.min_gbps {
        (g, format!("the floor {}", fmt_gbps(g)))
    } else if let Some(pct) = r.min_pct_of_link {
        let device = r.link.clone().or(found.device.clone());
        let Some(device) = device else {
            return check(
                Outcome::Fail(FailureKind::NoDevice),
                Some(found.value),
                None,
                format!("no device in `{}`: name the link with `link:`", r.path),
            );
        };
        let Some(link) = p.topology.links.iter().find(|l| l.device == device) else {
            return check(
                Outcome::Fail(FailureKind::NoLink),
                Some(found.value),
                None,
                format!("the profile records no PCIe link for `{device}`"),
            );
        };
        let (theory, label) = link_basis(link);
        // A link down reads 0 GB/s: no floor can be a share of it.
        if theory <= 0.0 || !theory.is_finite() {
            return check(
                Outcome::Fail(FailureKind::NoLink),
                Some(found.value),
                None,
                format!(
                    "the profile records {device}'s {label} link at {} theoretical: no floor \
                     can be a share of it",
                    fmt_gbps(theory)
                ),
            );
        }
        let floor = pct / 100.0 * theory;
        (
            floor,
            format!(
                "{pct}% of {device}'s {label} theoretical {} = {}",
                fmt_gbps(theory),
                fmt_gbps(floor)
            ),
        )
    } else if let Some(pct) = r.min_pct_of_baseline {
        let Some(base) = baseline.and_then(|b| find(b, &r.path)) else {
            return check(
                Outcome::Fail(FailureKind::MissingInBaseline),
                Some(found.value),
                None,
                format!("the baseline profile has no `{}`", r.path),
            );
        };
        // A ratio across copy kernels says nothing about the machine: neither pass nor fail on
        // it, and do not pass what cannot be confirmed.
        if let Some((was, now)) = method::changed(base.kernel.as_deref(), found.kernel.as_deref()) {
            return check(
                Outcome::Fail(FailureKind::NotComparable),
                Some(found.value),
                None,
                format!(
                    "not comparable: engine {was} (baseline) → {now} (profile); re-baseline \
                     with a profile measured with {now} (profile's {} {}, baseline's {}; not \
                     held to each other)",
                    found.what,
                    fmt_gbps(found.value),
                    fmt_gbps(base.value)
                ),
            );
        }
        let floor = pct / 100.0 * base.value;
        (
            floor,
            format!(
                "{pct}% of the baseline's {} = {}",
                fmt_gbps(base.value),
                fmt_gbps(floor)
            ),
        )
    } else {
        return check(
            Outcome::Fail(FailureKind::NoFloor),
            Some(found.value),
            None,
            "the rule gives no floor".into(),
        );
    };
    if !floor.is_finite() {
        return check(
            Outcome::Fail(FailureKind::NotFinite),
            Some(found.value),
            None,
            format!(
                "the floor is not a finite number ({basis}); the profile's {} is {}",
                found.what,
                fmt_gbps(found.value)
            ),
        );
    }
    let pass = found.value >= floor;
    let mut detail = format!(
        "{} {} {} {basis} ({})",
        found.what,
        fmt_gbps(found.value),
        if pass { ">=" } else { "<" },
        found.source
    );
    if found.contended && found.derived {
        detail
            .push_str(" (derived from a measurement taken while the device was busy; rerun idle)");
    } else if found.contended {
        detail.push_str(" (measured while the device was busy: a lower bound; rerun idle)");
    }
    if found.unsteady && found.derived {
        detail.push_str(
            " (derived from a measurement whose repetitions spread more than it was held to in \
             the window kept: unsteady; rerun idle)",
        );
    } else if found.unsteady {
        detail.push_str(
            " (its repetitions spread more than they were held to in the window kept: an unsteady \
             figure; rerun idle)",
        );
    }
    check(
        if pass {
            Outcome::Pass
        } else {
            Outcome::Fail(FailureKind::BelowFloor)
        },
        Some(found.value),
        Some(floor),
        detail,
    )
}

fn check_target(
    what: &str,
    current: u32,
    max: Option<u32>,
    target: LinkTarget,
) -> Result<String, (FailureKind, String)> {
    match target {
        LinkTarget::Max => match max {
            Some(m) if current == m => Ok(format!("{what} {current} = max")),
            Some(m) => Err((
                FailureKind::LinkBelowTarget,
                format!("{what} {current}, its maximum is {m}"),
            )),
            None => Err((
                FailureKind::MaxUnknown,
                format!("{what} {current}, maximum unknown: cannot confirm `max`"),
            )),
        },
        LinkTarget::AtLeast(n) if current >= n => Ok(format!("{what} {current} >= {n}")),
        LinkTarget::AtLeast(n) => Err((
            FailureKind::LinkBelowTarget,
            format!("{what} {current} < {n}"),
        )),
    }
}

/// The slowest link NVML read for `gpu` with any of its measured copies in flight (lowest
/// generation and lowest width), and how many cases it was read in.
fn slowest_under_load(p: &Profile, gpu: &str) -> Option<(hwc_model::LinkState, usize)> {
    let links: Vec<hwc_model::LinkState> = p
        .measurements
        .iter()
        .filter(|m| m.spec.gpu() == Some(gpu))
        .filter_map(|m| m.evidence.gpu_state.as_ref()?.link_under_load)
        .collect();
    let gen = links.iter().map(|l| l.gen).min()?;
    let width = links.iter().map(|l| l.width).min()?;
    Some((hwc_model::LinkState { gen, width }, links.len()))
}

fn check_link(p: &Profile, rule: &LinkRule, l: &LinkTheory) -> Check {
    // Idle GPUs downtrain their links; prefer what was read under load: the slowest of every
    // case's copies in flight, else the warm-up's.
    let per_case = slowest_under_load(p, &l.device);
    let under_load = p
        .provenance
        .environment
        .get(&hwc_model::gpu_key(&l.device, hwc_model::PCIE_LINK_LOAD))
        .and_then(|s| s.link);
    let (gen, width, source) = match (per_case, under_load) {
        (Some((link, n)), _) => (
            link.gen,
            link.width,
            format!("the slowest read under load in {n} case(s)"),
        ),
        (None, Some(link)) => (link.gen, link.width, "read under load".to_string()),
        // Not `gen`/`width`: where detection read the link slow, those are its maximum.
        (None, None) => {
            let d = l.detected.unwrap_or(l.state());
            (d.gen, d.width, "at detection".to_string())
        }
    };
    let mut ok = Vec::new();
    let mut bad = Vec::new();
    for (what, current, max, target) in [
        ("gen", gen, l.max_gen, rule.gen),
        ("width", width, l.max_width, rule.width),
    ] {
        if let Some(t) = target {
            match check_target(what, current, max, t) {
                Ok(m) => ok.push(m),
                Err(m) => bad.push(m),
            }
        }
    }
    // A link below its target is a fact about the node: it names the failure even when the
    // other half could not be confirmed.
    let outcome = if bad.is_empty() {
        Outcome::Pass
    } else if bad.iter().any(|(k, _)| *k == FailureKind::LinkBelowTarget) {
        Outcome::Fail(FailureKind::LinkBelowTarget)
    } else {
        Outcome::Fail(FailureKind::MaxUnknown)
    };
    Check {
        group: Group::Link,
        name: format!("{} link ({})", l.device, l.bdf),
        outcome,
        value: None,
        floor: None,
        detail: format!(
            "Gen{gen} x{width} {source}: {}",
            bad.iter()
                .map(|(_, m)| m)
                .chain(&ok)
                .cloned()
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// The measurements that crossed `path`: its GPU's copies, or those whose drives include the
/// path's device.
fn crossing<'p>(p: &'p Profile, path: &PciePath) -> Vec<&'p hwc_model::Measurement> {
    let bdf = path.hops.first().map(|h| h.bdf.as_str());
    p.measurements
        .iter()
        .filter(|m| {
            m.spec.gpu() == Some(path.device.as_str())
                || m.spec.drives().iter().any(|d| Some(d.as_str()) == bdf)
        })
        .collect()
}

/// The check of `no_link_errors: true` on one device's path: every measurement that crossed it,
/// with the counters that rose.
fn check_link_errors(p: &Profile, path: &PciePath) -> Check {
    let hops: Vec<&str> = path.hops.iter().map(|h| h.bdf.as_str()).collect();
    let crossed = crossing(p, path);
    let mut rose = Vec::new();
    for m in &crossed {
        for a in m.evidence.link_errors.iter().flatten() {
            if hops.contains(&a.bdf.as_str()) {
                rose.push(format!(
                    "{}: {} +{} correctable, +{} non-fatal, +{} fatal",
                    m.key, a.bdf, a.correctable, a.nonfatal, a.fatal
                ));
            }
        }
        if let Some(r) = m.evidence.gpu_state.as_ref().and_then(|g| g.pcie_replays) {
            if r > 0 {
                rose.push(format!("{}: {r} PCIe replays (NVML)", m.key));
            }
        }
    }
    let watched = crossed
        .iter()
        .filter(|m| m.evidence.gpu_state.is_some())
        .count();
    let (outcome, detail) = if rose.is_empty() {
        (
            Outcome::Pass,
            format!(
                "no AER counter on its {} hop(s) rose in the {} measurement(s) that crossed it; \
                 the replay counter was read in {watched}",
                hops.len(),
                crossed.len()
            ),
        )
    } else {
        (Outcome::Fail(FailureKind::LinkErrors), rose.join("; "))
    };
    Check {
        group: Group::Pcie,
        name: format!("{} link errors", path.device),
        outcome,
        value: None,
        floor: None,
        detail,
    }
}

/// The checks `rule` asks of one device's PCIe path: one per setting it names.
fn check_pcie(rule: &PcieRule, path: &PciePath) -> Vec<Check> {
    let d = &path.device;
    let unreadable: Vec<&str> = path
        .hops
        .iter()
        .filter(|h| h.config.unreadable.is_some())
        .map(|h| h.bdf.as_str())
        .collect();
    let check = |name: String, outcome, detail: String| Check {
        group: Group::Pcie,
        name,
        outcome,
        value: None,
        floor: None,
        detail,
    };
    let blind = || {
        (
            Outcome::Fail(FailureKind::PcieUnreadable),
            format!(
                "config space of {} not readable (it needs root): cannot be confirmed",
                unreadable.join(", ")
            ),
        )
    };
    let mut out = Vec::new();
    if let Some(min) = rule.min_mps_bytes {
        let mps: Option<Vec<(u32, &str)>> = path
            .hops
            .iter()
            .map(|h| Some((h.config.mps_bytes?, h.bdf.as_str())))
            .collect();
        let (outcome, detail) = match mps.and_then(|v| v.into_iter().min()) {
            None => blind(),
            Some((m, at)) if m < min => (
                Outcome::Fail(FailureKind::PcieSetting),
                format!("smallest MPS {m} bytes (at {at}), under {min}"),
            ),
            Some((m, at)) => (
                Outcome::Pass,
                format!("smallest MPS {m} bytes (at {at}), at least {min}"),
            ),
        };
        out.push(check(format!("{d} MPS"), outcome, detail));
    }
    if let Some(want) = rule.acs_redirect {
        let on: Vec<&str> = path
            .hops
            .iter()
            .filter(|h| h.config.acs.is_some_and(|a| a.p2p_request_redirect))
            .map(|h| h.bdf.as_str())
            .collect();
        let is = !on.is_empty();
        let (outcome, detail) = if !unreadable.is_empty() {
            blind()
        } else {
            let said = if is {
                format!("ACS P2P request redirect on at {}", on.join(", "))
            } else {
                "no bridge redirects P2P requests".to_string()
            };
            let ok = is == want;
            (
                if ok {
                    Outcome::Pass
                } else {
                    Outcome::Fail(FailureKind::PcieSetting)
                },
                format!("{said}; required {}", if want { "on" } else { "off" }),
            )
        };
        out.push(check(format!("{d} ACS redirect"), outcome, detail));
    }
    if let Some(allowed) = &rule.iommu {
        let domain = path
            .hops
            .first()
            .and_then(|h| h.iommu_domain.clone())
            .unwrap_or_else(|| "none".into());
        let ok = allowed.iter().any(|a| a.eq_ignore_ascii_case(&domain));
        out.push(check(
            format!("{d} IOMMU"),
            if ok {
                Outcome::Pass
            } else {
                Outcome::Fail(FailureKind::PcieSetting)
            },
            format!("domain {domain}; allowed {}", allowed.join(", ")),
        ));
    }
    out
}

/// Run every check of `spec` against `profile`. `baseline` is needed when a rule uses
/// `min_pct_of_baseline`.
pub fn qualify(
    spec: &Spec,
    spec_name: &str,
    profile: &Profile,
    profile_name: &str,
    baseline: Option<&Profile>,
) -> Result<QualifyReport, SpecError> {
    let needs = spec.baseline_rules();
    if needs > 0 && baseline.is_none() {
        return Err(SpecError::NoBaseline(needs));
    }
    let mut checks: Vec<Check> = spec
        .rules
        .iter()
        .map(|r| check_rule(profile, baseline, r))
        .collect();
    for rule in &spec.links {
        let matched: Vec<&LinkTheory> = profile
            .topology
            .links
            .iter()
            .filter(|l| glob(&rule.device, &l.device))
            .collect();
        if matched.is_empty() {
            let devices: Vec<&str> = profile
                .topology
                .links
                .iter()
                .map(|l| l.device.as_str())
                .collect();
            checks.push(Check {
                group: Group::Link,
                name: format!("{} link", rule.device),
                outcome: if rule.required {
                    Outcome::Fail(FailureKind::NoMatchingLink)
                } else {
                    Outcome::Skip
                },
                value: None,
                floor: None,
                detail: format!(
                    "no link in the profile matches `{}` (links: {})",
                    rule.device,
                    if devices.is_empty() {
                        "none".to_string()
                    } else {
                        devices.join(", ")
                    }
                ),
            });
        }
        checks.extend(matched.into_iter().map(|l| check_link(profile, rule, l)));
    }
    for rule in &spec.pcie {
        let matched: Vec<&PciePath> = profile
            .topology
            .pcie_paths
            .iter()
            .filter(|p| glob(&rule.device, &p.device))
            .collect();
        if matched.is_empty() {
            checks.push(Check {
                group: Group::Pcie,
                name: format!("{} PCIe path", rule.device),
                outcome: if rule.required {
                    Outcome::Fail(FailureKind::NoMatchingLink)
                } else {
                    Outcome::Skip
                },
                value: None,
                floor: None,
                detail: format!(
                    "no PCIe path in the profile matches `{}` (config space not read, or no such \
                     device)",
                    rule.device
                ),
            });
        }
        for path in matched {
            checks.extend(check_pcie(rule, path));
            if rule.no_link_errors == Some(true) {
                checks.push(check_link_errors(profile, path));
            }
        }
    }
    let count = |f: fn(&Outcome) -> bool| checks.iter().filter(|c| f(&c.outcome)).count();
    Ok(QualifyReport {
        spec: spec.name.clone().unwrap_or_else(|| spec_name.to_string()),
        profile: profile_name.to_string(),
        hostname: profile
            .platform
            .hostname
            .clone()
            .or(profile.provenance.hostname.clone()),
        measured_at: profile.provenance.finished_at.clone(),
        passed: count(|o| *o == Outcome::Pass),
        failed: count(|o| o.is_fail()),
        skipped: count(|o| *o == Outcome::Skip),
        checks,
    })
}

/// The pass/fail table.
pub fn render(r: &QualifyReport) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "spec     {}", r.spec);
    let _ = writeln!(
        s,
        "profile  {} ({}, measured {})",
        r.profile,
        r.hostname.as_deref().unwrap_or("unknown host"),
        r.measured_at
    );
    let width = r
        .checks
        .iter()
        .map(|c| c.name.len())
        .max()
        .unwrap_or(0)
        .max(20);
    let _ = writeln!(s);
    for c in &r.checks {
        let tag = match c.outcome {
            Outcome::Pass => "PASS",
            Outcome::Fail(_) => "FAIL",
            Outcome::Skip => "SKIP",
        };
        let _ = writeln!(s, "{tag}  {:<width$}  {}", c.name, c.detail);
    }
    let _ = writeln!(
        s,
        "\n{}: {} passed, {} failed, {} skipped",
        if r.ok() { "QUALIFIED" } else { "NOT QUALIFIED" },
        r.passed,
        r.failed,
        r.skipped
    );
    s
}

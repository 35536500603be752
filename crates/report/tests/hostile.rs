//! A profile whose every free string is hostile (escape sequences, BEL, NUL, a newline and a
//! `# heading`, table pipes, HTML) renders a report with no control character, no heading or
//! table row it did not write itself, and every table row as wide as its header.

use ciborium::Value;
use hwc_model::Profile;

const FIXTURE: &str = include_str!("../../profile/tests/fixtures/v1-h200-a.yaml");

fn hostile(i: usize) -> String {
    format!("h{i}\u{1b}]0;pwned\u{7}\u{0}\u{1b}[31m\n# pwned | a | b <script>*x* `y` [l](u)")
}

/// The text leaves under `v` (values: map keys are field names or data keys, made hostile
/// apart), in a fixed order.
fn leaves(v: &mut Value, out: &mut Vec<*mut String>) {
    match v {
        Value::Text(s) => out.push(s as *mut String),
        Value::Array(a) => a.iter_mut().for_each(|x| leaves(x, out)),
        Value::Map(m) => m.iter_mut().for_each(|(_, x)| leaves(x, out)),
        Value::Tag(_, x) => leaves(x, out),
        _ => {}
    }
}

fn child(v: &mut Value, i: usize) -> Option<&mut Value> {
    match v {
        Value::Array(a) => a.get_mut(i),
        Value::Map(m) => m.get_mut(i).map(|(_, x)| x),
        Value::Tag(_, x) if i == 0 => Some(x),
        _ => None,
    }
}

fn at<'a>(root: &'a mut Value, path: &[usize]) -> &'a mut Value {
    path.iter().fold(root, |v, &i| child(v, i).unwrap())
}

/// Replace every text leaf under `path` by a hostile string where the profile still reads it
/// whole (a leaf that a type parses, an enum name, is left as it was); divide where the whole
/// subtree does not.
fn inject(root: &mut Value, path: &mut Vec<usize>, n: &mut usize) {
    let mut trial = root.clone();
    let mut ls = Vec::new();
    leaves(at(&mut trial, path), &mut ls);
    if ls.is_empty() {
        return;
    }
    for (k, l) in ls.iter().enumerate() {
        // SAFETY: the pointers are into `trial`, alive and not otherwise borrowed here.
        unsafe { **l = hostile(*n + k) };
    }
    let whole = trial
        .deserialized::<Profile>()
        .is_ok_and(|p| Value::serialized(&p).unwrap() == trial);
    if whole {
        *n += ls.len();
        *root = trial;
        return;
    }
    for i in 0.. {
        if child(at(root, path), i).is_none() {
            break;
        }
        path.push(i);
        inject(root, path, n);
        path.pop();
    }
}

#[test]
fn a_profile_of_hostile_strings_renders_an_inert_report() {
    let p = hwc_profile::from_yaml(FIXTURE).unwrap();
    // The escaping's round trip loses nothing, and a real profile's strings read back escaped.
    let same =
        hwc_model::text::escape_strings(&p, |s: &str| std::borrow::Cow::Borrowed(s)).unwrap();
    assert!(same == p, "the round trip changed the profile");
    hwc_model::text::escape_strings(&p, hwc_model::text::escape_markdown).unwrap();

    let mut v = Value::serialized(&p).unwrap();
    let mut n = 0;
    inject(&mut v, &mut Vec::new(), &mut n);
    let mut bad: Profile = v.deserialized().unwrap();
    assert!(n > 100, "only {n} strings could be made hostile");
    assert!(bad.platform.hostname.as_deref().unwrap().contains('\u{1b}'));
    // Keys of the data maps too.
    bad.ceilings.insert(hostile(n), 42.0);
    let setting = bad.provenance.environment.values().next().unwrap().clone();
    bad.provenance.environment.insert(hostile(n + 1), setting);
    bad.provenance
        .options
        .insert(hostile(n + 2), hostile(n + 3));

    let md = hwc_report::render(&bad);
    assert!(md.contains("pwned"), "the hostile text is shown, escaped");
    for (i, line) in md.lines().enumerate() {
        assert!(
            !line.chars().any(char::is_control),
            "line {i} holds a control character: {line:?}"
        );
        assert!(
            !line.starts_with("# pwned"),
            "line {i} is a heading it injected"
        );
        assert!(
            !line.contains("<script>"),
            "line {i} holds raw HTML: {line}"
        );
    }
    // Every table row has as many cell separators as its header.
    let pipes = |l: &str| {
        let b = l.as_bytes();
        (0..b.len())
            .filter(|&i| b[i] == b'|' && (i == 0 || b[i - 1] != b'\\'))
            .count()
    };
    let mut header = None;
    for line in md.lines() {
        if !line.starts_with('|') {
            header = None;
            continue;
        }
        let w = *header.get_or_insert(pipes(line));
        assert_eq!(
            pipes(line),
            w,
            "a row wider or narrower than its header: {line}"
        );
    }
}

#[test]
fn absurd_figures_render_in_a_bounded_width() {
    let mut p = hwc_profile::from_yaml(FIXTURE).unwrap();
    for m in &mut p.measurements {
        m.gbps.median = 1e300;
        m.gbps.min = 1e300;
        m.gbps.max = 1e301;
        m.gbps.spread_pct = 900.0;
    }
    for v in p.ceilings.values_mut() {
        *v = 1e300;
    }
    let md = hwc_report::render(&p);
    assert!(md.contains("1.00e300"), "scientific past the bound");
    let longest = md
        .split(|c: char| !c.is_ascii_digit())
        .map(str::len)
        .max()
        .unwrap();
    assert!(longest <= 12, "a run of {longest} digits");
}

//! The HTTP surface: handlers, content negotiation, and JSON errors (`{"error": "..."}` with a
//! 4xx status for anything a caller got wrong; the daemon never answers a bad request with a
//! crash).

use crate::runner::{RunRequest, StartError};
use crate::store::{Loaded, Serving};
use crate::{metrics, AppState, Peer};
use axum::body::Bytes;
use axum::extract::rejection::QueryRejection;
use axum::extract::{ConnectInfo, DefaultBodyLimit, Query, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::sync::Arc;

type AppStateRef = State<Arc<AppState>>;

const ENDPOINTS: [&str; 8] = [
    "GET /healthz",
    "GET /metrics",
    "GET /v1/profile",
    "GET /v1/ceilings",
    "GET /v1/efficiency?path=KEY&measured_gbps=X",
    "GET /v1/profile/run",
    "POST /v1/profile/run",
    "DELETE /v1/profile/run",
];

pub(crate) fn router(state: Arc<AppState>) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/metrics", get(metrics_text))
        .route("/v1/profile", get(profile))
        .route("/v1/ceilings", get(ceilings))
        .route("/v1/efficiency", get(efficiency))
        .route(
            "/v1/profile/run",
            get(run_status).post(run_start).delete(run_cancel),
        )
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        // `serve` reads bodies, within `max_body_bytes` and a deadline.
        .layer(DefaultBodyLimit::disable())
        .with_state(state)
}

pub(crate) fn error(status: StatusCode, msg: impl Into<String>) -> Response {
    (status, Json(json!({ "error": msg.into() }))).into_response()
}

async fn not_found(method: Method, uri: Uri) -> Response {
    (
        StatusCode::NOT_FOUND,
        Json(json!({
            "error": format!("no such endpoint: {method} {}", uri.path()),
            "endpoints": ENDPOINTS,
        })),
    )
        .into_response()
}

async fn method_not_allowed(method: Method, uri: Uri) -> Response {
    error(
        StatusCode::METHOD_NOT_ALLOWED,
        format!("{} does not take {method}", uri.path()),
    )
}

fn no_profile(state: &AppState) -> Response {
    let mut msg = format!(
        "no profile loaded yet from {}: run `hwceiling profile` or POST /v1/profile/run",
        state.store.dir().display()
    );
    if let Some(e) = state.store.last_error() {
        msg.push_str(&format!(" (last load error: {e})"));
    }
    error(StatusCode::SERVICE_UNAVAILABLE, msg)
}

/// A run's completeness as a JSON object, to which an answer adds its own fields.
pub fn completeness_fields(c: &hwc_model::profile::Completeness) -> serde_json::Map<String, Value> {
    match serde_json::to_value(c.fields()) {
        Ok(Value::Object(m)) => m,
        _ => serde_json::Map::new(),
    }
}

/// The profile served, what its run was, and the newer incomplete profile passed over, if any.
fn profile_meta(s: &Serving, l: &Loaded) -> Value {
    let p = &l.profile;
    let mut m = completeness_fields(&l.completeness);
    let passed_over = s.passed_over.as_ref().map(|o| {
        let mut m = completeness_fields(&o.why);
        m.insert("file".into(), o.file.clone().into());
        Value::Object(m)
    });
    for (k, v) in [
        ("file", json!(l.file_name())),
        (
            "hostname",
            json!(p
                .platform
                .hostname
                .clone()
                .or(p.provenance.hostname.clone())),
        ),
        ("finished_at", json!(p.provenance.finished_at)),
        ("schema_version", json!(p.schema_version)),
        ("age_seconds", json!(l.age_seconds())),
        (
            "loaded_at",
            json!(chrono::DateTime::<chrono::Local>::from(l.loaded_at).to_rfc3339()),
        ),
        ("passed_over", json!(passed_over)),
        ("note", json!(s.note())),
    ] {
        m.insert(k.into(), v);
    }
    Value::Object(m)
}

/// `x-hwceiling-profile` names the file served; `x-hwceiling-profile-incomplete` says what its
/// run lacked (`quick`, `interrupted`, `narrowed`, comma-separated), and
/// `x-hwceiling-profile-passed-over` names a newer incomplete profile not served
/// (`FILE (quick)`). The options that narrowed a run are in the JSON answers (`narrowed_by`),
/// not in headers: they may hold a path that is no header value.
fn source_headers(s: &Serving, l: &Loaded, resp: &mut Response) {
    let mut headers = vec![("x-hwceiling-profile", l.file_name())];
    if !l.completeness.complete() {
        headers.push(("x-hwceiling-profile-incomplete", l.completeness.reasons()));
    }
    if let Some(o) = &s.passed_over {
        headers.push((
            "x-hwceiling-profile-passed-over",
            format!("{} ({})", o.file, o.why.reasons()),
        ));
    }
    for (name, value) in headers {
        if let Ok(v) = HeaderValue::from_str(&value) {
            resp.headers_mut().insert(name, v);
        }
    }
}

async fn healthz(State(state): AppStateRef) -> Response {
    let serving = state.store.serving();
    let (run, _) = state.runner.status_now();
    let run_state = match run {
        crate::RunStatus::Idle => "idle",
        crate::RunStatus::Running { .. } => "running",
        crate::RunStatus::Finished { .. } => "finished",
    };
    Json(json!({
        "status": "ok",
        "profile": serving.loaded.as_deref().map(|l| profile_meta(&serving, l)),
        "last_load_error": state.store.last_error(),
        "run": run_state,
    }))
    .into_response()
}

async fn metrics_text(State(state): AppStateRef, headers: HeaderMap) -> Response {
    let text = metrics::render(&state);
    // OpenMetrics when preferred; else, and for an `Accept` that takes neither, the
    // Prometheus text format (what a scraper falls back to).
    let ranges = accept_ranges(&headers);
    let open = quality(&ranges, &["application/openmetrics-text"]);
    if ranges.is_some() && open > quality(&ranges, &["text/plain"]) {
        ([(header::CONTENT_TYPE, metrics::OPENMETRICS)], text).into_response()
    } else {
        (
            [(header::CONTENT_TYPE, metrics::PROMETHEUS_TEXT)],
            metrics::prometheus_text(&text),
        )
            .into_response()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    Yaml,
    Json,
}

/// The media ranges of `Accept`, lower-cased, with their q-values (1 when not given, 0 when
/// not a number from 0 to 1); `None` without the header.
fn accept_ranges(headers: &HeaderMap) -> Option<Vec<(String, f32)>> {
    let accept = headers.get(header::ACCEPT)?.to_str().unwrap_or("");
    let ranges = accept.split(',').filter_map(|part| {
        let mut params = part.split(';');
        let range = params.next()?.trim().to_ascii_lowercase();
        let q = params
            .filter_map(|p| {
                let (k, v) = p.split_once('=')?;
                k.trim().eq_ignore_ascii_case("q").then(|| v.trim())
            })
            .next()
            .map_or(1.0, |v| {
                v.parse::<f32>()
                    .ok()
                    .filter(|q| (0.0..=1.0).contains(q))
                    .unwrap_or(0.0)
            });
        (!range.is_empty()).then_some((range, q))
    });
    Some(ranges.collect())
}

/// How much `Accept` wants any of `types` (one format's names): the q-value of the most
/// specific range that matches one (`type/subtype` over `type/*` over `*/*`); 0 when none does;
/// 1 without the header.
fn quality(ranges: &Option<Vec<(String, f32)>>, types: &[&str]) -> f32 {
    let Some(ranges) = ranges else {
        return 1.0;
    };
    let mut best: Option<(u8, f32)> = None;
    for (range, q) in ranges {
        for t in types {
            let specificity = if range == t {
                2
            } else if range == "*/*" {
                0
            } else if range
                .strip_suffix("/*")
                .is_some_and(|main| t.split('/').next() == Some(main))
            {
                1
            } else {
                continue;
            };
            if best.is_none_or(|(s, bq)| specificity > s || (specificity == s && *q > bq)) {
                best = Some((specificity, *q));
            }
        }
    }
    best.map_or(0.0, |(_, q)| q)
}

const YAML_TYPES: [&str; 5] = [
    "application/yaml",
    "application/x-yaml",
    "text/yaml",
    "text/x-yaml",
    "text/plain",
];

/// `?format=` wins; then `Accept` by q-value (YAML, the file as written, on a tie and without
/// the header); nothing acceptable is an error (406).
fn negotiate(headers: &HeaderMap, query: &BTreeMap<String, String>) -> Result<Format, String> {
    if let Some(f) = query.get("format") {
        return match f.as_str() {
            "yaml" => Ok(Format::Yaml),
            "json" => Ok(Format::Json),
            other => Err(format!("format `{other}`: use yaml or json")),
        };
    }
    let ranges = accept_ranges(headers);
    let yaml = quality(&ranges, &YAML_TYPES);
    let json = quality(&ranges, &["application/json"]);
    if json > yaml {
        Ok(Format::Json)
    } else if yaml > 0.0 {
        Ok(Format::Yaml)
    } else {
        let accept = headers
            .get(header::ACCEPT)
            .and_then(|a| a.to_str().ok())
            .unwrap_or("");
        Err(format!(
            "cannot answer `Accept: {accept}`: the profile is application/yaml or application/json"
        ))
    }
}

type RawQuery = Result<Query<Vec<(String, String)>>, QueryRejection>;

/// The query's parameters; one given twice is ambiguous, and refused (400) by name.
fn query_params(query: RawQuery) -> Result<BTreeMap<String, String>, String> {
    let Ok(Query(pairs)) = query else {
        return Err("malformed query string".into());
    };
    let mut map = BTreeMap::new();
    for (k, v) in pairs {
        if map.contains_key(&k) {
            return Err(format!(
                "`{k}` is given more than once in the query: give it once"
            ));
        }
        map.insert(k, v);
    }
    Ok(map)
}

async fn profile(State(state): AppStateRef, headers: HeaderMap, query: RawQuery) -> Response {
    let query = match query_params(query) {
        Ok(q) => q,
        Err(e) => return error(StatusCode::BAD_REQUEST, e),
    };
    let format = match negotiate(&headers, &query) {
        Ok(f) => f,
        Err(e) => return error(StatusCode::NOT_ACCEPTABLE, e),
    };
    let serving = state.store.serving();
    let Some(loaded) = serving.loaded.as_deref() else {
        return no_profile(&state);
    };
    let mut resp = match format {
        Format::Yaml => (
            [(header::CONTENT_TYPE, "application/yaml")],
            loaded.text.clone(),
        )
            .into_response(),
        Format::Json => Json(&loaded.profile).into_response(),
    };
    source_headers(&serving, loaded, &mut resp);
    resp
}

async fn ceilings(State(state): AppStateRef) -> Response {
    let serving = state.store.serving();
    let Some(loaded) = serving.loaded.as_deref() else {
        return no_profile(&state);
    };
    let map: BTreeMap<&str, f64> = serving
        .ceilings()
        .iter()
        .map(|c| (c.key, c.value))
        .collect();
    let mut resp = Json(&map).into_response();
    source_headers(&serving, loaded, &mut resp);
    resp
}

async fn efficiency(State(state): AppStateRef, query: RawQuery) -> Response {
    let q = match query_params(query) {
        Ok(q) => q,
        Err(e) => return error(StatusCode::BAD_REQUEST, e),
    };
    let Some(path) = q.get("path").filter(|p| !p.is_empty()) else {
        return error(
            StatusCode::BAD_REQUEST,
            "missing `path`: GET /v1/efficiency?path=KEY&measured_gbps=X",
        );
    };
    let Some(raw) = q.get("measured_gbps") else {
        return error(
            StatusCode::BAD_REQUEST,
            "missing `measured_gbps`: GET /v1/efficiency?path=KEY&measured_gbps=X",
        );
    };
    let measured = match hwc_compare::efficiency::parse_measured(raw) {
        Ok(v) => v,
        Err(e) => return error(StatusCode::BAD_REQUEST, e.to_string()),
    };
    let serving = state.store.serving();
    let Some(loaded) = serving.loaded.as_deref() else {
        return no_profile(&state);
    };
    use hwc_compare::EfficiencyError as E;
    // Every answer about the profile served, refusals too, says which profile it is and what
    // its run was (a ceiling unknown to a narrowed profile may be known to a complete one).
    let (status, mut body) =
        match hwc_compare::efficiency::efficiency_in(&loaded.profile, path, measured) {
            Ok(e) => (
                StatusCode::OK,
                serde_json::to_value(&e).unwrap_or_else(|_| json!({})),
            ),
            Err(E::UnknownPath { path, known }) => {
                let mut msg = format!("unknown ceiling `{path}` in {}", loaded.file_name());
                if !loaded.completeness.complete() {
                    msg.push_str(&format!(", {}", loaded.completeness.describe()));
                }
                (
                    StatusCode::NOT_FOUND,
                    json!({ "error": msg, "known_paths": known }),
                )
            }
            Err(e @ (E::NotBandwidth { .. } | E::BadMeasured(_))) => {
                (StatusCode::BAD_REQUEST, json!({ "error": e.to_string() }))
            }
            Err(e @ E::UnusableCeiling { .. }) => (
                StatusCode::UNPROCESSABLE_ENTITY,
                json!({ "error": e.to_string() }),
            ),
        };
    if let Value::Object(m) = &mut body {
        m.insert("profile".into(), profile_meta(&serving, loaded));
    }
    let mut resp = (status, Json(body)).into_response();
    source_headers(&serving, loaded, &mut resp);
    resp
}

async fn run_status(State(state): AppStateRef) -> Response {
    Json(state.runner.status().await).into_response()
}

fn local_only(peer: &Peer) -> Option<Response> {
    (!crate::is_local_peer(peer)).then(|| {
        error(
            StatusCode::FORBIDDEN,
            "profile runs are for local callers only (the Unix socket or loopback)",
        )
    })
}

async fn run_start(
    State(state): AppStateRef,
    ConnectInfo(peer): ConnectInfo<Peer>,
    body: Bytes,
) -> Response {
    if let Some(r) = local_only(&peer) {
        return r;
    }
    let request: RunRequest = if body.iter().all(u8::is_ascii_whitespace) {
        RunRequest::default()
    } else {
        // An object only: serde would also read a struct from an array, field by field in
        // order, so `[["host_ram"],[1]]` would quietly mean paths and threads. Read straight
        // into the request, not through a map, so a key given twice is refused by name
        // (`duplicate field `quick``), not taken at its last value.
        if body.trim_ascii_start().first() != Some(&b'{') {
            return error(
                StatusCode::BAD_REQUEST,
                "bad run request: the body is a JSON object of options (or empty)",
            );
        }
        match serde_json::from_slice(&body) {
            Ok(r) => r,
            Err(e) => return error(StatusCode::BAD_REQUEST, format!("bad run request: {e}")),
        }
    };
    let run = match request.to_config(state.runner.output_dir()) {
        Ok(c) => c,
        Err(e) => return error(StatusCode::BAD_REQUEST, format!("bad run request: {e}")),
    };
    let note = request.note();
    match state.runner.start(request, run) {
        Ok(status) => {
            // The run's state, and, for a quick or narrowed run, that its profile will not
            // replace a complete one.
            let mut body = serde_json::to_value(&status).unwrap_or(Value::Null);
            if let (Value::Object(m), Some(note)) = (&mut body, note) {
                m.insert("note".into(), note.into());
            }
            (StatusCode::ACCEPTED, Json(body)).into_response()
        }
        Err(StartError::Busy(status)) => (
            StatusCode::CONFLICT,
            Json(json!({
                "error": "a profile run is already in progress: one at a time",
                "run": status,
            })),
        )
            .into_response(),
        Err(StartError::ShuttingDown) => error(
            StatusCode::SERVICE_UNAVAILABLE,
            "the daemon is shutting down",
        ),
        Err(StartError::Spawn(e)) => error(StatusCode::INTERNAL_SERVER_ERROR, e),
    }
}

async fn run_cancel(State(state): AppStateRef, ConnectInfo(peer): ConnectInfo<Peer>) -> Response {
    if let Some(r) = local_only(&peer) {
        return r;
    }
    if state.runner.cancel() {
        (StatusCode::ACCEPTED, Json(state.runner.status_now().0)).into_response()
    } else {
        error(StatusCode::CONFLICT, "no profile run is in progress")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn accept(v: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::ACCEPT, HeaderValue::from_str(v).unwrap());
        h
    }

    #[test]
    fn content_negotiation() {
        let none = BTreeMap::new();
        assert_eq!(negotiate(&HeaderMap::new(), &none), Ok(Format::Yaml));
        assert_eq!(
            negotiate(&accept("application/json"), &none),
            Ok(Format::Json)
        );
        assert_eq!(
            negotiate(&accept("text/html, application/json;q=0.9"), &none),
            Ok(Format::Json)
        );
        assert_eq!(negotiate(&accept("*/*"), &none), Ok(Format::Yaml));
        assert!(negotiate(&accept("image/png"), &none).is_err());
        let q: BTreeMap<String, String> = [("format".to_string(), "json".to_string())].into();
        assert_eq!(negotiate(&accept("application/yaml"), &q), Ok(Format::Json));
        let bad: BTreeMap<String, String> = [("format".to_string(), "xml".to_string())].into();
        assert!(negotiate(&HeaderMap::new(), &bad).is_err());
    }
}

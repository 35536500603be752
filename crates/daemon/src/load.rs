//! A bounded load generator for the daemon: `concurrency` client threads send up to `requests`
//! requests (cycling through a list of paths, one connection per request) until the count or the
//! time limit is reached, then report requests/s and latency percentiles. Used by the load test
//! and `examples/loadtest.rs`; it refuses any target but a Unix socket or a loopback address.

use crate::client::{self, Target};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

#[derive(Debug, Clone)]
pub struct LoadPlan {
    pub requests: usize,
    pub concurrency: usize,
    pub max_duration: Duration,
    /// Paths (with query) to request, in turn.
    pub paths: Vec<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct LoadReport {
    /// Requests that got an answer or failed (not counting those never sent at the time limit).
    pub sent: usize,
    pub status_2xx: usize,
    pub status_4xx: usize,
    pub status_5xx: usize,
    /// Connection or protocol failures.
    pub failed: usize,
    pub wall: Duration,
    pub requests_per_s: f64,
    pub p50: Duration,
    pub p99: Duration,
    pub max: Duration,
}

impl std::fmt::Display for LoadReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} requests in {:.2} s: {:.0} requests/s; latency p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms; {} 2xx, {} 4xx, {} 5xx, {} failed",
            self.sent,
            self.wall.as_secs_f64(),
            self.requests_per_s,
            self.p50.as_secs_f64() * 1e3,
            self.p99.as_secs_f64() * 1e3,
            self.max.as_secs_f64() * 1e3,
            self.status_2xx,
            self.status_4xx,
            self.status_5xx,
            self.failed
        )
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("load tests only target a Unix socket or a loopback address, not {0}")]
    NotLocal(std::net::SocketAddr),
    #[error("a load plan needs at least one request, one client and one path")]
    Empty,
}

/// Run the plan against `target`.
pub fn run(target: &Target, plan: &LoadPlan) -> Result<LoadReport, LoadError> {
    if let Target::Tcp(a) = target {
        if !a.ip().to_canonical().is_loopback() {
            return Err(LoadError::NotLocal(*a));
        }
    }
    if plan.requests == 0 || plan.concurrency == 0 || plan.paths.is_empty() {
        return Err(LoadError::Empty);
    }
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<(Duration, Option<u16>)>> =
        Mutex::new(Vec::with_capacity(plan.requests));
    let start = Instant::now();
    let deadline = start + plan.max_duration;
    std::thread::scope(|s| {
        for _ in 0..plan.concurrency.min(plan.requests) {
            s.spawn(|| {
                let mut mine = Vec::new();
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= plan.requests || Instant::now() >= deadline {
                        break;
                    }
                    let path = &plan.paths[i % plan.paths.len()];
                    let t = Instant::now();
                    let status = client::get_json(target, path, Duration::from_secs(10))
                        .ok()
                        .map(|r| r.status);
                    mine.push((t.elapsed(), status));
                }
                results
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .extend(mine);
            });
        }
    });
    let wall = start.elapsed();
    let results = results.into_inner().unwrap_or_else(|p| p.into_inner());
    let mut latencies: Vec<Duration> = results.iter().map(|(d, _)| *d).collect();
    latencies.sort();
    let count = |f: &dyn Fn(u16) -> bool| results.iter().filter(|(_, s)| s.is_some_and(f)).count();
    Ok(LoadReport {
        sent: results.len(),
        status_2xx: count(&|s| (200..300).contains(&s)),
        status_4xx: count(&|s| (400..500).contains(&s)),
        status_5xx: count(&|s| s >= 500),
        failed: results.iter().filter(|(_, s)| s.is_none()).count(),
        wall,
        requests_per_s: results.len() as f64 / wall.as_secs_f64().max(1e-9),
        p50: percentile(&latencies, 50.0),
        p99: percentile(&latencies, 99.0),
        max: latencies.last().copied().unwrap_or_default(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_by_nearest_rank() {
        let v: Vec<Duration> = (1..=100).map(Duration::from_millis).collect();
        assert_eq!(percentile(&v, 50.0), Duration::from_millis(50));
        assert_eq!(percentile(&v, 99.0), Duration::from_millis(99));
        assert_eq!(percentile(&v[..1], 99.0), Duration::from_millis(1));
        assert_eq!(percentile(&[], 99.0), Duration::ZERO);
    }

    #[test]
    fn only_local_targets() {
        let plan = LoadPlan {
            requests: 1,
            concurrency: 1,
            max_duration: Duration::from_secs(1),
            paths: vec!["/healthz".into()],
        };
        let far = Target::Tcp("192.0.2.1:80".parse().unwrap());
        assert!(matches!(run(&far, &plan), Err(LoadError::NotLocal(_))));
        let empty = LoadPlan {
            paths: vec![],
            ..plan
        };
        let local = Target::Tcp("127.0.0.1:9".parse().unwrap());
        assert!(matches!(run(&local, &empty), Err(LoadError::Empty)));
    }
}

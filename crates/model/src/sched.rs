//! Scheduling evidence of a case's timed repetitions: for each repetition, how long each of its
//! threads waited for a CPU, how often it was switched out against its will, and how much time
//! the hypervisor stole from its CPU. It says whether a slow repetition was held back by
//! scheduling, or shows that it was not. Kept in the raw JSON record ([`crate::CaseResult`]);
//! the profile carries its typed summary ([`SchedSummary`], a measurement's
//! `evidence.scheduling`).
//!
//! A counter that could not be read is `None` (and the evidence says why), never 0.

use serde::{Deserialize, Serialize};

/// A repetition is *disturbed* when one of its threads waited on the run queue, or had its CPU
/// stolen by the hypervisor, for more than this share (per cent) of the repetition's time.
///
/// Why 1 %: a `memcpy` repetition lasts as long as its slowest thread (each copies a fixed
/// slice), so a thread kept off its CPU for `d` makes the repetition up to `d` longer (the
/// streaming kernel's threads take blocks in turn, so there the others take up part of the
/// slack and `d` is an upper bound). Time off the CPU under 1 % of a repetition therefore moves
/// its figure by under 1 %: it cannot explain spreads of several per cent (4–30 % for `memcpy`
/// at 1 GiB on the H200 VM), and a repetition past it has scheduling as a cause of at least
/// that much. 1 % is also the spread the GPU copies are held to, the precision the tool calls
/// steady. A lower share would flag what cannot matter (a timer interrupt's softirq or a
/// kworker's few µs on a repetition of milliseconds); a higher one would pass delays that move
/// a figure more than the tool calls steady.
///
/// Three limits of the counters, which make the rule err towards *disturbed*: a thread's
/// counters bracket more than the timed region, from its read before it arms (so its wait for
/// the other threads to arm too, which can outlast a short repetition: the note then says
/// so instead of a share over 100 %) to its read right after its own part (a read on its own
/// CPU, which holds no other thread back); the timing thread's own part ends when every thread
/// is done, so it counts what it waited for its CPU while it spun too, which holds the
/// repetition back only if it still waits when the others finish; and steal is counted in ticks
/// of `1/USER_HZ` s (10 ms), more than 1 % of any repetition shorter than a second, so for those
/// any tick of steal on a thread's CPU marks the repetition, and its size is known to a tick.
pub const DISTURBED_ABOVE_PCT: f64 = 1.0;

/// How many of a case's repetitions were disturbed, and how many could not be judged (a
/// thread's run-queue delay missing), out of how many.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RepCounts {
    pub disturbed: usize,
    pub not_judged: usize,
    pub of: usize,
}

impl RepCounts {
    /// Every repetition judged, none disturbed.
    pub fn undisturbed(&self) -> bool {
        self.disturbed == 0 && self.not_judged == 0
    }
}

/// A case's scheduling, as the profile keeps it: the counts the report tallies, the rule they
/// were judged by, and one line for a reader (the largest delay, steal and switches, and whether
/// the disturbed repetitions were the slow ones). The line is for people: no code reads it back.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SchedSummary {
    /// The repetitions' counts; absent where no repetition could be judged (a counter unread).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub counts: Option<RepCounts>,
    /// The share of a repetition (per cent) off the CPU past which it is disturbed
    /// ([`DISTURBED_ABOVE_PCT`] when it was written).
    pub disturbed_above_pct: f64,
    /// What the counters read, in words.
    pub detail: String,
}

impl std::fmt::Display for SchedSummary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.detail)
    }
}

/// One thread's scheduling over one repetition (differences of counters read by the thread
/// itself just before and just after its part of the repetition).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ThreadSched {
    /// The CPU the thread was pinned to.
    pub cpu: u32,
    /// Nanoseconds the thread spent runnable but waiting for its CPU (the run-queue delay: the
    /// second field of `/proc/thread-self/schedstat`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_delay_ns: Option<u64>,
    /// Involuntary context switches (`getrusage(RUSAGE_THREAD)`'s `ru_nivcsw`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nivcsw: Option<u64>,
    /// Microseconds the hypervisor stole from the thread's CPU (its `/proc/stat` line's steal
    /// column, counted in ticks of `1/USER_HZ` s: see [`SchedEvidence::steal_tick_us`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steal_us: Option<u64>,
}

/// What a backend read over one repetition.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RepSched {
    /// Each thread of the repetition, in the order of the case's CPUs.
    pub threads: Vec<ThreadSched>,
    /// Microseconds stolen from every CPU of the machine together (`/proc/stat`'s `cpu` line),
    /// over the repetition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine_steal_us: Option<u64>,
}

/// What a backend could and could not read, said once per preparation of a case.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SchedSources {
    /// One tick of the steal counters in µs (`1/USER_HZ`: 10 000 at the usual 100 Hz): steal
    /// over a repetition is known to about one tick.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steal_tick_us: Option<u64>,
    /// Why a counter is absent (`run-queue delay not available: …`), one line each.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unavailable: Vec<String>,
}

/// One timed repetition's evidence, with the runner's verdict.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RepEvidence {
    /// The repetition's time, by the backend's timer, in seconds.
    pub seconds: f64,
    /// True when a thread waited for its CPU, or had it stolen, for more than
    /// [`SchedEvidence::disturbed_above_pct`] of `seconds`; false only when every thread's
    /// run-queue delay was read and none of its readings was over; absent otherwise (not
    /// judged).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disturbed: Option<bool>,
    #[serde(flatten)]
    pub sched: RepSched,
}

/// A case's scheduling evidence: one entry per timed repetition of the window its figure comes
/// from, in the order of its `samples_gbps`. Disturbed repetitions stay in the figure.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SchedEvidence {
    /// A repetition is disturbed when one of its threads waited for its CPU, or had it stolen,
    /// for more than this share (per cent) of the repetition's time.
    pub disturbed_above_pct: f64,
    /// See [`SchedSources::steal_tick_us`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steal_tick_us: Option<u64>,
    /// See [`SchedSources::unavailable`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unavailable: Vec<String>,
    pub reps: Vec<RepEvidence>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn undisturbed_needs_every_repetition_judged_and_none_disturbed() {
        for (disturbed, not_judged, of, calm) in [
            (0, 0, 12, true),
            (3, 0, 200, false),
            (12, 0, 12, false),
            (0, 3, 12, false),
        ] {
            let c = RepCounts {
                disturbed,
                not_judged,
                of,
            };
            assert_eq!(c.undisturbed(), calm, "{c:?}");
        }
    }
}

//! The GPU's state while a case runs, from NVML: clocks, temperature, clock-event reasons and
//! the PCIe link, sampled with the case's second batch of copies in flight (its calibration's
//! batch of K: never the first, which is the case's cold figure, nor a timed one) and again
//! right after its last timed repetition, and the PCIe replay counter when the case is
//! prepared and when its figures are taken.
//!
//! Never during a timed repetition: NVML's reads reach the GPU over the same link, and on the
//! H100 test machine sampling during timed repetitions (their 2nd, 6th and 14th) spread pinned
//! H2D copies 1–7 % where they had spread about 0.1 % (D2H stayed within 0.5 %): the reads'
//! completions share the downstream direction with H2D's (docs/measurements.md).

use hwc_model::{ClockEvent, GpuCaseState, LinkState, Range};
use nvml_wrapper::bitmasks::device::ThrottleReasons;
use nvml_wrapper::enum_wrappers::device::{Clock, TemperatureSensor};
use nvml_wrapper::Device;

/// One sample with copies in flight.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct InFlight {
    pub sm_clock_mhz: Option<u32>,
    pub mem_clock_mhz: Option<u32>,
    pub temperature_c: Option<u32>,
    /// NVML's clock-event reason bits.
    pub reasons: Option<u64>,
    pub link: Option<LinkState>,
}

/// Watches one GPU through one case.
pub(crate) struct StateWatch<'n> {
    device: Device<'n>,
    batches: u32,
    samples: Vec<InFlight>,
    replays_before: Option<u32>,
    persistence_mode: Option<bool>,
    link_max: Option<LinkState>,
}

impl<'n> StateWatch<'n> {
    pub(crate) fn new(device: Device<'n>) -> Self {
        let link_max = match (device.max_pcie_link_gen(), device.max_pcie_link_width()) {
            (Ok(gen), Ok(width)) => Some(LinkState { gen, width }),
            _ => None,
        };
        StateWatch {
            replays_before: device.pcie_replay_counter().ok(),
            persistence_mode: device.is_in_persistent_mode().ok(),
            link_max,
            device,
            batches: 0,
            samples: Vec::new(),
        }
    }

    /// A calibration batch timed out: the next batch that completes is the case's first.
    pub(crate) fn restart(&mut self) {
        self.batches = 0;
        self.samples.clear();
    }

    /// A batch of the case's copies is in flight: sample during the second (see the module's
    /// doc).
    pub(crate) fn in_flight(&mut self) {
        self.batches += 1;
        if self.batches == 2 {
            let s = self.read();
            self.samples.push(s);
        }
    }

    fn read(&self) -> InFlight {
        let d = &self.device;
        let link = match (d.current_pcie_link_gen(), d.current_pcie_link_width()) {
            (Ok(gen), Ok(width)) => Some(LinkState { gen, width }),
            _ => None,
        };
        InFlight {
            sm_clock_mhz: d.clock_info(Clock::SM).ok(),
            mem_clock_mhz: d.clock_info(Clock::Memory).ok(),
            temperature_c: d.temperature(TemperatureSensor::Gpu).ok(),
            reasons: d.current_throttle_reasons().ok().map(|r| r.bits()),
            link,
        }
    }

    /// Sample once more (the case's repetitions have just finished: the link has not yet
    /// idled), then what the samples say, and how far the replay counter rose since the case
    /// was prepared.
    pub(crate) fn state(&self) -> GpuCaseState {
        let mut samples = self.samples.clone();
        samples.push(self.read());
        let replays_after = self.device.pcie_replay_counter().ok();
        summarize(
            &samples,
            self.persistence_mode,
            self.link_max,
            self.replays_before.zip(replays_after),
        )
    }
}

/// NVML's clock-event reason bits as events, the idle one left out (the copies kept the GPU
/// busy; NVML still sets it between batches).
pub(crate) fn reasons(bits: u64) -> Vec<ClockEvent> {
    const EVENTS: [(ThrottleReasons, ClockEvent); 8] = [
        (
            ThrottleReasons::APPLICATIONS_CLOCKS_SETTING,
            ClockEvent::ApplicationsClocksSetting,
        ),
        (ThrottleReasons::SW_POWER_CAP, ClockEvent::SwPowerCap),
        (ThrottleReasons::HW_SLOWDOWN, ClockEvent::HwSlowdown),
        (ThrottleReasons::SYNC_BOOST, ClockEvent::SyncBoost),
        (
            ThrottleReasons::SW_THERMAL_SLOWDOWN,
            ClockEvent::SwThermalSlowdown,
        ),
        (
            ThrottleReasons::HW_THERMAL_SLOWDOWN,
            ClockEvent::HwThermalSlowdown,
        ),
        (
            ThrottleReasons::HW_POWER_BRAKE_SLOWDOWN,
            ClockEvent::HwPowerBrakeSlowdown,
        ),
        (
            ThrottleReasons::DISPLAY_CLOCK_SETTING,
            ClockEvent::DisplayClockSetting,
        ),
    ];
    EVENTS
        .iter()
        .filter(|(r, _)| bits & r.bits() != 0)
        .map(|(_, e)| *e)
        .collect()
}

/// The case's state from its samples: each reading's range, every reason seen, the slowest
/// link (lowest generation and lowest width), the replay counter's rise (a counter that went
/// down, reset, is no rise).
pub(crate) fn summarize(
    samples: &[InFlight],
    persistence_mode: Option<bool>,
    link_max: Option<LinkState>,
    replays: Option<(u32, u32)>,
) -> GpuCaseState {
    let mut clock_events: Vec<ClockEvent> = samples
        .iter()
        .filter_map(|s| s.reasons)
        .flat_map(reasons)
        .collect();
    clock_events.sort();
    clock_events.dedup();
    let links: Vec<LinkState> = samples.iter().filter_map(|s| s.link).collect();
    let link_under_load = (!links.is_empty()).then(|| LinkState {
        gen: links.iter().map(|l| l.gen).min().unwrap_or(0),
        width: links.iter().map(|l| l.width).min().unwrap_or(0),
    });
    GpuCaseState {
        samples: u32::try_from(samples.len()).unwrap_or(u32::MAX),
        sm_clock_mhz: Range::of(samples.iter().filter_map(|s| s.sm_clock_mhz)),
        mem_clock_mhz: Range::of(samples.iter().filter_map(|s| s.mem_clock_mhz)),
        temperature_c: Range::of(samples.iter().filter_map(|s| s.temperature_c)),
        clock_events,
        persistence_mode,
        link_under_load,
        link_max,
        pcie_replays: replays.map(|(before, after)| u64::from(after.saturating_sub(before))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(sm: u32, gen: u32, width: u32, reasons: u64) -> InFlight {
        InFlight {
            sm_clock_mhz: Some(sm),
            mem_clock_mhz: Some(2619),
            temperature_c: Some(40 + sm / 1000),
            reasons: Some(reasons),
            link: Some(LinkState { gen, width }),
        }
    }

    #[test]
    fn a_case_s_state_is_the_range_of_its_samples_and_the_slowest_link() {
        let power = ThrottleReasons::SW_POWER_CAP.bits();
        let idle = ThrottleReasons::GPU_IDLE.bits();
        let samples = [
            sample(1980, 5, 16, idle),
            sample(1755, 4, 16, power | idle),
            sample(1980, 5, 8, 0),
        ];
        let max = Some(LinkState { gen: 5, width: 16 });
        let s = summarize(&samples, Some(true), max, Some((7, 10)));
        assert_eq!(s.samples, 3);
        assert_eq!(
            s.sm_clock_mhz,
            Some(Range {
                min: 1755,
                max: 1980
            })
        );
        assert_eq!(
            s.mem_clock_mhz,
            Some(Range {
                min: 2619,
                max: 2619
            })
        );
        assert_eq!(s.temperature_c, Some(Range { min: 41, max: 41 }));
        // The idle reason is left out; the power cap is named once.
        assert_eq!(s.clock_events, [ClockEvent::SwPowerCap]);
        assert_eq!(s.link_under_load, Some(LinkState { gen: 4, width: 8 }));
        assert!(s.downtrained());
        assert_eq!(s.pcie_replays, Some(3));
        // A steady case: nothing downtrained, a counter reset is no rise.
        let steady = summarize(&[sample(1980, 5, 16, 0)], None, max, Some((9, 2)));
        assert!(!steady.downtrained());
        assert!(steady.clock_events.is_empty());
        assert_eq!(steady.pcie_replays, Some(0));
        // Nothing sampled: nothing claimed.
        let none = summarize(&[], None, None, None);
        assert_eq!((none.sm_clock_mhz, none.link_under_load), (None, None));
        assert!(!none.downtrained());
    }
}

//! The CPU latency QoS (`/dev/cpu_dma_latency`): how deep the CPUs may idle while a
//! run holds it, held the way cyclictest holds it.
//!
//! A process that writes a bound (in microseconds) to `/dev/cpu_dma_latency` and keeps
//! the file open asks the kernel's cpuidle governor for idle states whose exit latency
//! is within the bound; at 0 the CPUs only poll. The kernel drops the request when the
//! file is closed, which it does itself when the process ends: no crash can leave the
//! machine held. cyclictest holds 0 by default (`--laptop` turns that off); ictus holds
//! 0 by default too, so that their figures compare at equal settings.
//!
//! ```
//! use ictus_os::pm_qos::{self, PmQos};
//! let held = pm_qos::hold(PmQos::default());
//! // Held at 0 us as root; refused (and said why) otherwise. The run goes on.
//! assert_eq!(held.state().requested, PmQos::Bound(0));
//! drop(held); // the kernel drops the request
//! ```

use std::fmt;
use std::fs::File;
use std::io::{self, Write};
use std::str::FromStr;

use ictus_core::warning::{Warning, WarningId};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The device through which a process holds the CPU latency QoS.
pub const DEVICE: &str = "/dev/cpu_dma_latency";

/// The CPU latency QoS a run asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PmQos {
    /// Leave power management alone: measure the machine as it idles (cyclictest's
    /// `--laptop`).
    Off,
    /// Hold idle states' exit latency within this many microseconds (0, the default
    /// and what cyclictest holds: poll only).
    Bound(u32),
}

impl Default for PmQos {
    /// 0 us, as cyclictest.
    fn default() -> Self {
        PmQos::Bound(0)
    }
}

impl PmQos {
    /// The bound in microseconds, `None` when off.
    pub fn bound_us(self) -> Option<u32> {
        match self {
            PmQos::Off => None,
            PmQos::Bound(us) => Some(us),
        }
    }
}

impl fmt::Display for PmQos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.bound_us() {
            None => f.write_str("off"),
            Some(us) => write!(f, "{us}"),
        }
    }
}

/// A `pm_qos` value that is neither `off` nor a number of microseconds.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("expected 'off' or a latency bound in microseconds (such as 0 or 20us), found '{0}'")]
pub struct ParsePmQosError(pub String);

impl FromStr for PmQos {
    type Err = ParsePmQosError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let t = s.trim();
        if t.eq_ignore_ascii_case("off") {
            return Ok(PmQos::Off);
        }
        let digits = t.strip_suffix("us").unwrap_or(t).trim();
        match digits.parse::<u32>() {
            Ok(us) => Ok(PmQos::Bound(us)),
            Err(_) => Err(ParsePmQosError(s.to_string())),
        }
    }
}

impl Serialize for PmQos {
    /// `"off"`, or the bound in microseconds as a number.
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.bound_us() {
            None => s.serialize_str("off"),
            Some(us) => s.serialize_u32(us),
        }
    }
}

impl<'de> Deserialize<'de> for PmQos {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Us(u32),
            Text(String),
        }
        match Raw::deserialize(d)? {
            Raw::Us(us) => Ok(PmQos::Bound(us)),
            Raw::Text(t) => t.parse().map_err(serde::de::Error::custom),
        }
    }
}

/// What a run had in force, for its record.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PmQosState {
    /// What was asked for.
    pub requested: PmQos,
    /// The bound held for the whole run, in microseconds (`None`: nothing held,
    /// because it was off or refused).
    pub held_us: Option<u32>,
    /// Why a bound asked for is not held, with the fix.
    pub refused: Option<String>,
}

impl PmQosState {
    /// The warning a run carries when the bound asked for is not held (`None` when
    /// it is, or when the QoS was off): what that means, and the fix.
    pub fn warning(&self) -> Option<Warning> {
        let why = self.refused.as_ref()?;
        Some(Warning {
            id: WarningId::PmQosRefused,
            message: format!(
                "the CPU latency QoS ({} us) is not held: the CPUs may idle deeply between \
                 deadlines and wake late",
                self.requested
            ),
            advice: Some(why.clone()),
        })
    }

    /// One phrase for tables and headlines: `held at 0 us`, `off`, `refused`.
    pub fn phrase(&self) -> String {
        match (self.held_us, self.requested.bound_us()) {
            (Some(us), _) => format!("held at {us} us"),
            (None, None) => "off".into(),
            (None, Some(_)) => "refused".into(),
        }
    }
}

/// A held CPU latency QoS request: dropping it (or the process ending) releases it.
#[derive(Debug)]
pub struct PmQosHold {
    // Kept open for the request to stay in force; closed on drop.
    _file: Option<File>,
    state: PmQosState,
}

impl PmQosHold {
    /// What is in force.
    pub fn state(&self) -> &PmQosState {
        &self.state
    }

    /// A hold that holds nothing (the QoS was off).
    pub fn none() -> PmQosHold {
        PmQosHold {
            _file: None,
            state: PmQosState {
                requested: PmQos::Off,
                held_us: None,
                refused: None,
            },
        }
    }
}

/// Asks for `request` and holds it until the returned value is dropped. A refusal
/// (no device, no permission) is said in the state, with the fix; it never fails the
/// run.
pub fn hold(request: PmQos) -> PmQosHold {
    hold_at(DEVICE, request)
}

/// [`hold`] through another path (tests).
pub fn hold_at(path: &str, request: PmQos) -> PmQosHold {
    let Some(us) = request.bound_us() else {
        return PmQosHold {
            _file: None,
            state: PmQosState {
                requested: request,
                held_us: None,
                refused: None,
            },
        };
    };
    let refused = |why: String| PmQosHold {
        _file: None,
        state: PmQosState {
            requested: request,
            held_us: None,
            refused: Some(why),
        },
    };
    let mut file = match File::options().write(true).open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return refused(format!(
                "{path} does not exist (a kernel without CPU latency QoS): the CPUs idle as \
                 they will, measured as they are"
            ));
        }
        Err(e) if e.kind() == io::ErrorKind::PermissionDenied => {
            return refused(format!(
                "{path} is not writable by this user ({e}): the CPUs idle as they will. Run \
                 as root, or give this user write access (a udev rule: KERNEL==\"cpu_dma_latency\", \
                 GROUP=\"realtime\", MODE=\"0660\")"
            ));
        }
        Err(e) => return refused(format!("opening {path} failed: {e}")),
    };
    // The kernel takes a 32-bit binary value (or a hex string); binary as cyclictest.
    let value = i32::try_from(us).unwrap_or(i32::MAX);
    if let Err(e) = file.write_all(&value.to_ne_bytes()) {
        return refused(format!("writing {us} to {path} failed: {e}"));
    }
    PmQosHold {
        _file: Some(file),
        state: PmQosState {
            requested: request,
            held_us: Some(us),
            refused: None,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn off_and_bounds_parse_and_print_back() {
        assert_eq!("off".parse::<PmQos>(), Ok(PmQos::Off));
        assert_eq!("0".parse::<PmQos>(), Ok(PmQos::Bound(0)));
        assert_eq!("20us".parse::<PmQos>(), Ok(PmQos::Bound(20)));
        assert_eq!(" 7 ".parse::<PmQos>(), Ok(PmQos::Bound(7)));
        assert!("-1".parse::<PmQos>().is_err());
        assert!("fast".parse::<PmQos>().is_err());
        for q in [PmQos::Off, PmQos::Bound(0), PmQos::Bound(20)] {
            assert_eq!(q.to_string().parse::<PmQos>().unwrap(), q);
            let json = serde_json::to_string(&q).unwrap();
            assert_eq!(serde_json::from_str::<PmQos>(&json).unwrap(), q);
        }
        assert_eq!(serde_json::to_string(&PmQos::Off).unwrap(), "\"off\"");
        assert_eq!(serde_json::to_string(&PmQos::Bound(0)).unwrap(), "0");
    }

    #[test]
    fn off_holds_nothing_and_says_so() {
        let sut = hold_at("/nonexistent/cpu_dma_latency", PmQos::Off);
        assert_eq!(sut.state().held_us, None);
        assert_eq!(sut.state().refused, None);
        assert_eq!(sut.state().phrase(), "off");
    }

    #[test]
    fn a_missing_device_is_a_refusal_with_its_reason_never_an_error() {
        let sut = hold_at("/nonexistent/cpu_dma_latency", PmQos::Bound(0));
        assert_eq!(sut.state().held_us, None);
        assert!(
            sut.state()
                .refused
                .as_ref()
                .unwrap()
                .contains("does not exist")
        );
        assert_eq!(sut.state().phrase(), "refused");
    }

    #[test]
    fn a_bound_is_written_as_four_bytes_and_held_while_open() {
        let dir = std::env::temp_dir().join(format!("ictus-pmqos-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("dev");
        std::fs::write(&path, b"").unwrap();
        let sut = hold_at(path.to_str().unwrap(), PmQos::Bound(20));
        assert_eq!(sut.state().held_us, Some(20));
        assert_eq!(std::fs::read(&path).unwrap(), 20i32.to_ne_bytes());
        assert_eq!(sut.state().phrase(), "held at 20 us");
        drop(sut);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

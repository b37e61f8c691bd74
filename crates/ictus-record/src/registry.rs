//! The registry: every probe, once. A probe is its folder (`src/<probe>/`: params,
//! validation, the measuring loop, its view) and one line in [`for_each_probe!`](crate::for_each_probe);
//! the [`ProbeId`] enum, its names, and every crate's dispatch over the probes
//! (the report's sections, the command line) are generated from that one list.
//!
//! ```
//! use ictus_record::registry::ProbeId;
//! let id: ProbeId = "pingpong".parse().unwrap();
//! assert_eq!(id, ProbeId::Pingpong);
//! assert_eq!(id.name(), "pingpong");
//! assert!(ProbeId::ALL.contains(&id));
//! assert!("cyclictest".parse::<ProbeId>().is_err());
//! ```

/// Calls `$callback! { (Variant, module, "name"), ... }` with every probe, in the
/// order the survey and the report list them. The one list of the probes: a new
/// probe adds its line here, and every `match` generated from it follows.
///
/// `module` is the probe's folder in `ictus_probe` (and, by the same name, its
/// report file in `ictus_report::probes`); with the `cli` feature its `cli::Args` is
/// the subcommand `ictus probe <name>`.
#[macro_export]
macro_rules! for_each_probe {
    ($callback:ident) => {
        $callback! {
            (Timer, timer, "timer"),
            (Pingpong, pingpong, "pingpong"),
            (Jitter, jitter, "jitter"),
            (Loop, r#loop, "loop"),
            (Memlat, memlat, "memlat"),
            (Irq, irq, "irq"),
            (Compute, compute, "compute"),
            (Rendezvous, rendezvous, "rendezvous"),
            (Throughput, throughput, "throughput"),
        }
    };
}

macro_rules! define_probe_id {
    ($(($variant:ident, $module:ident, $name:literal)),* $(,)?) => {
        /// Which probe: the one name records, the command line and the report use.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum ProbeId {
            $(
                #[doc = concat!("`", $name, "`")]
                $variant,
            )*
        }

        impl ProbeId {
            /// Every probe, in the registry's order.
            pub const ALL: &'static [ProbeId] = &[$(ProbeId::$variant),*];

            /// Its name, as records and the command line say it.
            pub const fn name(self) -> &'static str {
                match self {
                    $(ProbeId::$variant => $name,)*
                }
            }
        }
    };
}

for_each_probe!(define_probe_id);

/// The `probe` of an executive's record (`ictus run`): not a probe, but a record
/// every reader of records knows.
pub const RUN_RECORD: &str = "run";

impl ProbeId {
    /// Every name a record's `probe` may hold: the probes' and [`RUN_RECORD`].
    pub fn record_names() -> impl Iterator<Item = &'static str> {
        Self::ALL
            .iter()
            .map(|p| p.name())
            .chain(std::iter::once(RUN_RECORD))
    }
}

impl std::fmt::Display for ProbeId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A name that is no probe's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown probe '{0}'")]
pub struct UnknownProbe(pub String);

impl std::str::FromStr for ProbeId {
    type Err = UnknownProbe;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .iter()
            .copied()
            .find(|p| p.name() == s)
            .ok_or_else(|| UnknownProbe(s.to_owned()))
    }
}

impl PartialEq<str> for ProbeId {
    fn eq(&self, other: &str) -> bool {
        self.name() == other
    }
}

impl PartialEq<ProbeId> for str {
    fn eq(&self, other: &ProbeId) -> bool {
        self == other.name()
    }
}

impl PartialEq<ProbeId> for String {
    fn eq(&self, other: &ProbeId) -> bool {
        self.as_str() == other.name()
    }
}

impl serde::Serialize for ProbeId {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> serde::Deserialize<'de> for ProbeId {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_parses_back_to_its_probe_and_names_are_unique() {
        let mut seen = std::collections::BTreeSet::new();
        for &p in ProbeId::ALL {
            assert_eq!(p.name().parse::<ProbeId>().unwrap(), p);
            assert!(seen.insert(p.name()), "{p} twice");
            let json = serde_json::to_string(&p).unwrap();
            assert_eq!(json, format!("\"{p}\""));
            assert_eq!(serde_json::from_str::<ProbeId>(&json).unwrap(), p);
        }
        assert!(!seen.contains(RUN_RECORD));
        assert_eq!(ProbeId::record_names().count(), ProbeId::ALL.len() + 1);
    }
}

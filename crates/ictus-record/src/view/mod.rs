//! Typed views of the records: each kind of [`Measurement`] a probe writes has its
//! labels and its metrics as two serde structs whose field names are the record's
//! keys. The probe writes a measurement through its view ([`Point::measurement`]) and
//! the report reads it back through the same view ([`Measurement::read`]), so every
//! key is spelled once, and a key spelled differently on the two sides no longer
//! compiles into an empty table cell.
//!
//! This module holds the machinery ([`Kind`], [`Point`]) and the view of the
//! executive's record ([`run`]); each probe's views live in its folder
//! (`ictus_probe::<probe>::view`, e.g. `ictus_probe::rendezvous::view`).
//!
//! The record format is the one in `docs/result-schema.md`: labels are JSON values,
//! metrics are numbers. A metric that is `None` or not finite is left out, as
//! [`Measurement::metric`] leaves it out; an `Option` label is left out when `None`
//! unless its view says it is written as `null`. Reading ignores keys the view does not
//! name, so a record with more figures than this ictus knows still reads.
//!
//! ```
//! use ictus_record::record::Measurement;
//! use ictus_record::view::{Empty, Point};
//! use ictus_record::view::run::{Stress, StressMetrics};
//!
//! let point = Point::<Stress>::new(
//!     Empty {},
//!     StressMetrics { run_frames: 400.0, final_value: 388.0, missed_frames: 12.0, incoherent_cells: 0.0 },
//! );
//! let m: Measurement = point.measurement();
//! assert_eq!(m.name, "stress");
//! assert_eq!(m.metrics["missed_frames"], 12.0);
//! assert_eq!(m.read::<Stress>(), Some(point));
//! ```

pub mod run;

use std::fmt;

use ictus_os::sched::Policy;
use serde::de::{DeserializeOwned, Error as _};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

use crate::record::{Measurement, RunRecord};

/// One kind of measurement: the names it is written under, and its labels and metrics
/// as serde structs (one field per key, the units in the names).
pub trait Kind {
    /// The measurement names of this kind; the first is the one
    /// [`Point::measurement`] writes.
    const NAMES: &'static [&'static str];
    /// The coordinates of the point.
    type Labels: Clone + fmt::Debug + PartialEq + Serialize + DeserializeOwned;
    /// The figures of the point: `f64` fields, or `Option<f64>` for a figure that may
    /// be left out.
    type Metrics: Clone + fmt::Debug + PartialEq + Serialize + DeserializeOwned;
}

/// A measurement of kind `K` with its labels and metrics typed. Its latency stays on
/// the [`Measurement`] it was read from.
pub struct Point<K: Kind> {
    /// The coordinates.
    pub labels: K::Labels,
    /// The figures.
    pub metrics: K::Metrics,
}

// By hand: derived, they would ask the kind (a type with no values) for the traits.
impl<K: Kind> Clone for Point<K> {
    fn clone(&self) -> Self {
        Point::new(self.labels.clone(), self.metrics.clone())
    }
}

impl<K: Kind> fmt::Debug for Point<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Point")
            .field("labels", &self.labels)
            .field("metrics", &self.metrics)
            .finish()
    }
}

impl<K: Kind> PartialEq for Point<K> {
    fn eq(&self, other: &Self) -> bool {
        self.labels == other.labels && self.metrics == other.metrics
    }
}

impl<K: Kind> Point<K> {
    /// A point of this kind.
    pub fn new(labels: K::Labels, metrics: K::Metrics) -> Self {
        Point { labels, metrics }
    }

    /// The measurement, named the kind's first name, without a latency.
    pub fn measurement(&self) -> Measurement {
        self.measurement_named(K::NAMES[0])
    }

    /// The measurement named `name`, one of the kind's names, without a latency.
    pub fn measurement_named(&self, name: &str) -> Measurement {
        debug_assert!(
            K::NAMES.contains(&name),
            "{name} is not one of {:?}",
            K::NAMES
        );
        Measurement {
            name: name.to_string(),
            labels: object(&self.labels).into_iter().collect(),
            // `None` and figures that are not finite serialize as null: left out.
            metrics: object(&self.metrics)
                .into_iter()
                .filter_map(|(k, v)| Some((k, v.as_f64()?)))
                .collect(),
            latency: None,
        }
    }
}

/// The fields of a view's labels or metrics.
fn object(fields: &impl Serialize) -> Map<String, Value> {
    match serde_json::to_value(fields) {
        Ok(Value::Object(map)) => map,
        // Views are structs of plain fields: they serialize to an object, and the
        // round-trip tests write every one of them.
        other => unreachable!("a view serializes to a JSON object, not {other:?}"),
    }
}

impl Measurement {
    /// Whether this measurement is of kind `K` (by its name).
    pub fn is<K: Kind>(&self) -> bool {
        K::NAMES.contains(&self.name.as_str())
    }

    /// This measurement read as kind `K`: `None` when its name is not one of the
    /// kind's, or when a label or metric the view needs is missing or of another type.
    pub fn read<K: Kind>(&self) -> Option<Point<K>> {
        if !self.is::<K>() {
            return None;
        }
        let labels: Map<String, Value> = self
            .labels
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let metrics: Map<String, Value> = self
            .metrics
            .iter()
            .map(|(k, &v)| (k.clone(), Value::from(v)))
            .collect();
        Some(Point {
            labels: serde_json::from_value(Value::Object(labels)).ok()?,
            metrics: serde_json::from_value(Value::Object(metrics)).ok()?,
        })
    }
}

impl RunRecord {
    /// The parameters read as `P` (a probe's recorded parameters): `None` when a field
    /// `P` needs is missing or of another type.
    pub fn parameters_as<P: DeserializeOwned>(&self) -> Option<P> {
        P::deserialize(&self.parameters).ok()
    }

    /// The scheduling policy the parameters asked for, wherever the probe keeps it:
    /// at the top (the timer's, the probes' of one measurement per point, imported records) or
    /// in its `SchedSpec` (`jitter`, `loop`, `compute`, `rendezvous`).
    pub fn policy_requested(&self) -> Option<Policy> {
        /// The two places; the probes' own parameter types are tested to agree.
        #[derive(Deserialize)]
        struct Either {
            policy: Option<Policy>,
            sched: Option<Sched>,
        }
        /// The part of a probe's `SchedSpec` (`ictus_probe::setup`) read here.
        #[derive(Deserialize)]
        struct Sched {
            policy: Policy,
        }
        let either = self.parameters_as::<Either>()?;
        either.policy.or(either.sched.map(|s| s.policy))
    }
}

/// The written form of [`AllOr::All`].
const ALL: &str = "all";

/// A label naming one thing or all of them: `"thread": 2` or `"thread": "all"`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum AllOr<T> {
    /// All of them (the aggregate): written `"all"`.
    All,
    /// This one.
    One(T),
}

impl<T: fmt::Display> fmt::Display for AllOr<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AllOr::All => f.write_str(ALL),
            AllOr::One(t) => t.fmt(f),
        }
    }
}

impl<T: Serialize> Serialize for AllOr<T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            AllOr::All => s.serialize_str(ALL),
            AllOr::One(t) => t.serialize(s),
        }
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for AllOr<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Written<T> {
            One(T),
            Word(String),
        }
        match Written::deserialize(d)? {
            Written::One(t) => Ok(AllOr::One(t)),
            Written::Word(w) if w == ALL => Ok(AllOr::All),
            Written::Word(w) => Err(D::Error::custom(format!(
                "expected a number or \"{ALL}\", found \"{w}\""
            ))),
        }
    }
}

/// The labels or metrics of a kind that has none.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Empty {}

/// The checks every view's tests make: a point written and read back the same, a
/// measurement read back as written. Public for the probes' tests (their views live
/// in their crate); not part of the record's API.
#[doc(hidden)]
pub mod check {
    use super::{Kind, Measurement, Point};

    /// Writes `point`, checks the measurement's name and that it reads back the same
    /// (through JSON, as a record file does); returns the measurement.
    pub fn round_trip<K: Kind>(point: &Point<K>, name: &str) -> Measurement {
        let m = point.measurement_named(name);
        let text = serde_json::to_string(&m).unwrap();
        let back: Measurement = serde_json::from_str(&text).unwrap();
        assert_eq!(back.read::<K>().as_ref(), Some(point), "{text}");
        m
    }

    /// Reads `m` as `K` and checks that writing the point again gives `m`'s labels and
    /// metrics: what a probe wrote is what its view reads, nothing lost or added.
    pub fn reads_back<K: Kind>(m: &Measurement) -> Point<K> {
        let p = m
            .read::<K>()
            .unwrap_or_else(|| panic!("{} does not read as its view: {m:?}", m.name));
        let again = p.measurement_named(&m.name);
        assert_eq!((&again.labels, &again.metrics), (&m.labels, &m.metrics));
        p
    }

    /// The key sets of a measurement's labels and metrics, to compare with what a
    /// probe wrote before the views.
    pub fn keys(m: &Measurement) -> (Vec<&str>, Vec<&str>) {
        (
            m.labels.keys().map(String::as_str).collect(),
            m.metrics.keys().map(String::as_str).collect(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use check::{keys, round_trip};

    enum Probe {}

    #[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
    struct Labels {
        cpu: AllOr<usize>,
        #[serde(skip_serializing_if = "Option::is_none")]
        stride_bytes: Option<u64>,
    }

    #[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
    struct Metrics {
        ns: f64,
        rate: Option<f64>,
    }

    impl Kind for Probe {
        const NAMES: &'static [&'static str] = &["probe", "other"];
        type Labels = Labels;
        type Metrics = Metrics;
    }

    fn sut(rate: Option<f64>) -> Point<Probe> {
        Point::new(
            Labels {
                cpu: AllOr::All,
                stride_bytes: None,
            },
            Metrics { ns: 3.0, rate },
        )
    }

    #[test]
    fn absent_and_non_finite_figures_are_left_out_as_the_builder_leaves_them_out() {
        for rate in [None, Some(f64::NAN), Some(f64::INFINITY)] {
            let m = sut(rate).measurement();
            assert_eq!(m.name, "probe");
            assert_eq!(keys(&m), (vec!["cpu"], vec!["ns"]));
            assert_eq!(m.labels["cpu"], "all");
        }
        round_trip(&sut(Some(2.0)), "other");
    }

    #[test]
    fn a_missing_or_mistyped_key_or_another_name_reads_as_none() {
        let good = sut(None).measurement();
        assert!(good.read::<Probe>().is_some());
        let mut renamed = good.clone();
        renamed.name = "trial".into();
        assert!(renamed.read::<Probe>().is_none());
        let mut missing = good.clone();
        missing.metrics.remove("ns");
        assert!(missing.read::<Probe>().is_none());
        let mut mistyped = good.clone();
        mistyped.labels.insert("cpu".into(), "some".into());
        assert!(mistyped.read::<Probe>().is_none());
        let mut more = good;
        more.labels.insert("future_label".into(), 1.into());
        more.metrics.insert("future_metric".into(), 1.0);
        assert!(more.read::<Probe>().is_some(), "unknown keys are ignored");
    }

    #[test]
    fn all_or_one_reads_a_number_or_the_word_all() {
        let read = |v: Value| serde_json::from_value::<AllOr<usize>>(v).ok();
        assert_eq!(read(serde_json::json!(3)), Some(AllOr::One(3)));
        assert_eq!(read(serde_json::json!("all")), Some(AllOr::All));
        assert_eq!(read(serde_json::json!("most")), None);
        assert_eq!(AllOr::<usize>::All.to_string(), "all");
        assert_eq!(AllOr::One(7).to_string(), "7");
    }
}

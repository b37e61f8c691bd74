//! Typed views of the records: the machinery and the executive's view are
//! `ictus-record`'s ([`ictus_record::view`], re-exported here); each probe's views
//! live in its folder (`crate::<probe>::view`, e.g. [`crate::rendezvous::view`]).

pub use ictus_record::view::*;

#[cfg(test)]
pub(crate) mod tests {
    use std::collections::BTreeMap;
    use std::fmt;

    use ictus_os::sched::Policy;
    use serde::Serialize;
    use serde::de::DeserializeOwned;
    use serde_json::Value;

    pub(crate) use ictus_record::view::check::{keys, reads_back, round_trip};

    use crate::record::RunRecord;
    use crate::setup::SchedSpec;

    /// A record of `probe` with these parameters.
    fn record(probe: &str, parameters: Value) -> RunRecord {
        RunRecord::new(
            probe,
            crate::provenance::Provenance::capture(Vec::new()),
            parameters,
            crate::record::Obtained::default(),
        )
    }

    /// A record of `probe` whose parameters are `p` as the probe writes them; checks
    /// that they read back as `P` and give the policy asked for.
    pub(crate) fn params_read_back<P>(probe: &str, p: &P, policy: Policy)
    where
        P: Serialize + DeserializeOwned + PartialEq + fmt::Debug,
    {
        let r = record(probe, serde_json::to_value(p).unwrap());
        assert_eq!(r.parameters_as::<P>().as_ref(), Some(p), "{probe}");
        assert_eq!(r.policy_requested(), Some(policy), "{probe}");
    }

    #[test]
    fn every_probes_parameters_read_back_with_their_policy() {
        use crate::registry::ProbeId;
        use crate::{compute, jitter, r#loop, rendezvous, throughput, timer};
        let fifo = Policy::Fifo { priority: 42 };
        let sched = |s: &SchedSpec| SchedSpec {
            policy: fifo,
            ..s.clone()
        };
        let mut t = timer::TimerParams::default();
        t.sched = sched(&t.sched);
        params_read_back(ProbeId::Timer.name(), &timer::ParamsRecord::from(&t), fifo);
        // The hand-off's and memory latency's: in their folders' views.
        let mut t = throughput::ThroughputParams::default();
        t.sched = sched(&t.sched);
        params_read_back(
            ProbeId::Throughput.name(),
            &throughput::ParamsRecord::from(&t),
            fifo,
        );
        let mut j = jitter::JitterParams::default();
        j.sched = sched(&j.sched);
        params_read_back(ProbeId::Jitter.name(), &j, fifo);
        let mut l = r#loop::LoopParams::default();
        l.sched = sched(&l.sched);
        params_read_back(ProbeId::Loop.name(), &l, fifo);
        let mut c = compute::ComputeParams::default();
        c.sched = sched(&c.sched);
        params_read_back(ProbeId::Compute.name(), &c, fifo);
        let mut r = rendezvous::RendezvousParams::default();
        r.sched = sched(&r.sched);
        params_read_back(ProbeId::Rendezvous.name(), &r, fifo);
    }

    #[test]
    fn the_policy_is_found_at_the_top_or_in_sched() {
        let fifo = Policy::Fifo { priority: 80 };
        let mut r = record(
            crate::registry::ProbeId::Timer.name(),
            serde_json::json!({ "policy": fifo }),
        );
        assert_eq!(r.policy_requested(), Some(fifo));
        r.parameters = serde_json::to_value(BTreeMap::from([(
            "sched",
            SchedSpec {
                cpus: ictus_core::CpuSet::from_cpus([0]),
                pin: true,
                policy: fifo,
                mlock: false,
                pm_qos: Default::default(),
                explain: true,
                explain_threshold: None,
            },
        )]))
        .unwrap();
        assert_eq!(r.policy_requested(), Some(fifo));
        r.parameters = serde_json::json!({ "runs": 3 });
        assert_eq!(r.policy_requested(), None);
    }
}

//! A probe's refusal of its parameters as bad input: exit 2, led by the option it
//! concerns, so every refusal after parsing names its flag as clap's own do (issue
//! "Hardening": exit 2, the flag, the limit). Which option each refusal concerns is
//! the probe's to say (`ProbeCommand::refused_flag` in its folder's `cli.rs`).
//!
//! Limits known before parsing (sizes, counts, frequencies) are checked by the
//! options' value parsers (`ictus_probe::cli`); what is left here depends on several
//! options or on the machine (threads against the CPUs given, a margin against the
//! interval, offline CPUs).

use crate::Failure;

/// `error` as bad input (exit 2), led by `flag`, the option it concerns (the probe's
/// [`ProbeCommand::refused_flag`](ictus_probe::cli::ProbeCommand::refused_flag)),
/// unless its message already names it.
pub(crate) fn refused<E>(error: E, flag: Option<&'static str>) -> Failure
where
    E: std::error::Error + Send + Sync + 'static,
{
    match flag {
        Some(flag) if !error.to_string().contains(flag) => {
            Failure::usage(anyhow::Error::new(error).context(flag))
        }
        _ => Failure::usage(error),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ictus_core::Nanos;
    use ictus_probe::cli::ProbeCommand;
    use ictus_probe::memlat::MemlatError;
    use ictus_probe::timer::TimerError;

    fn refused_as<A: ProbeCommand>(error: A::Error) -> Failure {
        let flag = A::refused_flag(&error);
        refused(error, flag)
    }

    #[test]
    fn a_refusal_names_its_flag_once() {
        let sut = refused_as::<ictus_probe::timer::cli::Args>(TimerError::Margin {
            margin: Nanos::from_millis(2),
            interval: Nanos::from_millis(1),
        });
        let line = crate::one_line(&sut.error);
        assert!(line.starts_with("--margin: "), "{line}");
        assert_eq!(sut.code, 2);
        let sut = refused_as::<ictus_probe::memlat::cli::Args>(MemlatError::Threads {
            threads: 3,
            cpus: 2,
        });
        assert_eq!(crate::one_line(&sut.error).matches("--threads").count(), 1);
    }
}

//! What `ictus run` and `ictus node` need of the run across hosts (the `hosts`
//! feature): this host's security from `--keys`/`--insecure` and the schedule, and the
//! link to the other hosts.

use ictus_exec::link::Link;
use ictus_exec::role::Role;
use ictus_exec::schedule::Schedule;
pub(crate) use ictus_net::security::Security;
use ictus_probe::session::Session;

use crate::Failure;
use crate::run_args::TrustArgs;

/// This host's security (see [`ictus_net::trust::resolve`]); bad input, exit 2.
pub(crate) fn security_for(
    schedule: &Schedule,
    here: usize,
    trust: &TrustArgs,
) -> Result<Option<Security>, Failure> {
    let asked = ictus_net::trust::Trust {
        keys: trust.keys.clone(),
        shared_keys: trust.shared_keys,
        insecure: trust.insecure,
    };
    ictus_net::trust::resolve(schedule, here, &asked)
        .map_err(|e| Failure::usage(anyhow::anyhow!(e)))
}

/// Joins the other hosts of the run (none: no link), warning when the links are
/// not authenticated or their certificates end soon.
pub(crate) fn join_hosts(
    schedule: &mut Schedule,
    here: usize,
    security: Option<&Security>,
    session: &mut Session,
) -> Result<Option<Box<dyn Link>>, Failure> {
    let link: Option<Box<dyn Link>> =
        ictus_net::join::join(schedule, Role::of_host(here), security)
            .map_err(|e| anyhow::anyhow!("opening the link to the other hosts: {e}"))?
            .map(|l| Box::new(l) as Box<dyn Link>);
    if link.is_some() && security == Some(&Security::Insecure) {
        let w = ictus_core::warning::Warning::new(
            ictus_core::warning::WarningId::InsecureLinks,
            "the links across hosts are plain TCP without authentication (--insecure): \
             any machine that can reach a host's port can read, write and stop this run",
            Some("make the run's keys with `ictus keys new DIR --hosts ...` and give --keys DIR"),
        );
        eprintln!("warning: {}", w.message);
        session.warn(w);
    }
    if let Some(Security::Tls(c)) = security
        && let Some(w) = ictus_net::trust::expiring(c)
    {
        eprintln!("warning: {}", w.message);
        session.warn(w);
    }
    Ok(link)
}

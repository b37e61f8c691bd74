//! Which trust a host of a run across hosts runs with: its keys (`--keys`, else the
//! schedule's `[security] keys`, `{host}` standing for its name), or none on purpose
//! (`--insecure`); keys that hold other hosts' private keys, keys that have ended, a
//! schedule that turns trust off by itself and a schedule across hosts without keys
//! are refused, each saying what to do. The command line's words are `ictus run`'s and
//! `ictus node`'s.

use std::path::PathBuf;
use std::time::Duration;

use ictus_core::warning::{Warning, WarningId};
use ictus_exec::schedule::Schedule;

use crate::security::{Credentials, Security};

/// What the command line asked for.
#[derive(Clone, Debug, Default)]
pub struct Trust {
    /// `--keys`: this host's bundle.
    pub keys: Option<PathBuf>,
    /// `--shared-keys`: a folder with other hosts' private keys is used as it is.
    pub shared_keys: bool,
    /// `--insecure`: no TLS, no access rules.
    pub insecure: bool,
}

/// How the links of a run across hosts are secured (`None`: one host, no links):
/// This host's security, from `--keys` or `--insecure`, else the schedule's `[security]`. Without either,
/// a schedule with hosts is refused (bad input: nothing starts), saying how to make
/// keys; so are keys that are not there for this host.
pub fn resolve(
    schedule: &Schedule,
    here: usize,
    trust: &Trust,
) -> Result<Option<Security>, String> {
    if schedule.hosts.is_empty() {
        if trust.keys.is_some() || trust.insecure {
            return Err(format!(
                "--keys and --insecure apply to a run across hosts; {} has no host table",
                schedule.path.display()
            ));
        }
        return Ok(None);
    }
    let dir = trust.keys.clone().or_else(|| {
        (!trust.insecure)
            .then(|| schedule.security.keys.clone())
            .flatten()
    });
    if let Some(dir) = dir {
        let host = &schedule.hosts[here].name;
        // `{host}` in the path is this host's name: one schedule for every host,
        // each finding its own bundle (`keys = "keys/bundles/hosts/{host}"`).
        let dir = PathBuf::from(dir.to_string_lossy().replace("{host}", host));
        let credentials = Credentials::of_host(&dir, host).map_err(|e| e.to_string())?;
        let foreign = crate::security::foreign_keys(&dir, host);
        if !foreign.is_empty() && !trust.shared_keys {
            return Err(format!(
                "{} holds private keys host {host} must not have: {}; a copy stolen from \
                 this host would be every one of them. Copy to this host only its bundle, \
                 KEYS/bundles/hosts/{host} (`ictus keys new` made it), and give that \
                 folder to --keys; where every host runs on this machine, --shared-keys \
                 uses the folder as it is",
                dir.display(),
                foreign.join(", ")
            ));
        }
        expiry(&credentials, host)?;
        return Ok(Some(Security::Tls(credentials)));
    }
    if trust.insecure {
        return Ok(Some(Security::Insecure));
    }
    // A schedule alone cannot turn trust off: a file copied from elsewhere would
    // open every host to anyone who reaches its port.
    if schedule.security.insecure {
        return Err(format!(
            "{} says [security] insecure = true: a run without authentication (anyone \
             who reaches a host's port may read, write and stop it) needs --insecure on \
             the command line as well",
            schedule.path.display()
        ));
    }
    let names: Vec<&str> = schedule.hosts.iter().map(|h| h.name.as_str()).collect();
    Err(format!(
        "{} runs across hosts ({}) and no keys were given: make them with \
         `ictus keys new KEYS --hosts {}`, copy to each host H only its bundle, \
         KEYS/bundles/hosts/H, and give that folder as `--keys` to `ictus run` and \
         every `ictus node` (or `[security] keys = \"FOLDER\"` in the schedule); \
         `--insecure` runs without authentication",
        schedule.path.display(),
        names.join(", "),
        names.join(",")
    ))
}

/// How long before its certificate (or the CA's) ends a run warns.
pub const EXPIRY_WARNING: Duration = Duration::from_secs(14 * 86_400);

/// Refuses credentials whose certificate or CA has ended (no peer would accept
/// them: the run would only wait), saying how to renew.
fn expiry(c: &Credentials, host: &str) -> Result<(), String> {
    for (what, path) in [("its certificate", &c.cert), ("the run's CA", &c.ca)] {
        let end = crate::keys::expires(path)?;
        if end <= std::time::SystemTime::now() {
            return Err(format!(
                "host {host}'s keys have ended: {what} ({}) was valid until {}; make a \
                 new one with `ictus keys renew KEYS --host {host}` where the keys were \
                 made{}",
                path.display(),
                humantime::format_rfc3339_seconds(end),
                if what == "the run's CA" {
                    " (an ended CA needs new keys for every host: `ictus keys new`)"
                } else {
                    ""
                }
            ));
        }
    }
    Ok(())
}

/// The warning of credentials that end within [`EXPIRY_WARNING`], if they do.
pub fn expiring(c: &Credentials) -> Option<Warning> {
    let soon = std::time::SystemTime::now() + EXPIRY_WARNING;
    let (what, end) = [("its certificate", &c.cert), ("the run's CA", &c.ca)]
        .into_iter()
        .filter_map(|(what, p)| Some((what, crate::keys::expires(p).ok()?)))
        .min_by_key(|(_, end)| *end)?;
    (end < soon).then(|| {
        Warning::new(
            WarningId::KeysExpiring,
            format!(
                "this host's keys end soon: {what} is valid until {}",
                humantime::format_rfc3339_seconds(end)
            ),
            Some("renew with `ictus keys renew KEYS --host H` where the keys were made, and copy the bundle again"),
        )
    })
}

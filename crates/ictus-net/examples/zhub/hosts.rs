//! The `hosts` placement's options (where this process is, its Zenoh
//! endpoints, the run's keys); the runs themselves are in `link.rs`.

use std::path::PathBuf;

use ictus_net::Endpoints;

use crate::Error;

/// Where this process is among the hosts, and its Zenoh endpoints.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct HostArgs {
    /// The run's hosts, in order (the first is A's and the sender's).
    pub(crate) hosts: Vec<String>,
    /// This process's index in `hosts`.
    pub(crate) here: usize,
    pub(crate) listen: Vec<String>,
    pub(crate) connect: Vec<String>,
    /// The run's keys (`zhub keys`): the session's links are then Zenoh's QUIC
    /// or TLS with mutual authentication, else plain.
    pub(crate) keys: Option<PathBuf>,
}

impl HostArgs {
    /// Reads `--hosts H1,H2 --here H --listen EP [--connect EP]... [--keys DIR]`
    /// from the front of `args`; returns the rest.
    pub(crate) fn parse<'a>(mut args: &'a [&'a str]) -> Result<(HostArgs, &'a [&'a str]), String> {
        let (mut hosts, mut here, mut listen, mut connect) = (None, None, vec![], vec![]);
        let mut keys = None;
        while let [flag, value, rest @ ..] = args {
            match *flag {
                "--hosts" => hosts = Some(value.split(',').map(str::to_owned).collect::<Vec<_>>()),
                "--here" => here = Some(value.to_string()),
                "--listen" => listen.push(value.to_string()),
                "--connect" => connect.push(value.to_string()),
                "--keys" => keys = Some(PathBuf::from(value)),
                _ => break,
            }
            args = rest;
        }
        let hosts = hosts.ok_or("--hosts H1,H2: missing")?;
        if hosts.len() != 2 || hosts.iter().any(String::is_empty) || hosts[0] == hosts[1] {
            return Err(format!(
                "--hosts {}: expected two different names",
                hosts.join(",")
            ));
        }
        let here = here.ok_or("--here H: missing")?;
        let here = hosts
            .iter()
            .position(|h| *h == here)
            .ok_or_else(|| format!("--here {here}: expected one of {}", hosts.join(", ")))?;
        if listen.is_empty() {
            return Err("--listen ENDPOINT: missing".into());
        }
        let ls: Vec<&str> = listen.iter().map(String::as_str).collect();
        let cs: Vec<&str> = connect.iter().map(String::as_str).collect();
        Endpoints::parse(&ls, &cs).map_err(|e| e.to_string())?;
        Ok((
            HostArgs {
                hosts,
                here,
                listen,
                connect,
                keys,
            },
            args,
        ))
    }
}

/// Makes the run's keys in `dir` for `hosts` (comma-separated): a CA and each
/// host's certificate, as `ictus keys new` does.
pub(crate) fn keys(dir: &str, hosts: &str) -> Result<(), Error> {
    ictus_net::keys::new(&ictus_net::keys::KeysRequest {
        dir: PathBuf::from(dir),
        hosts: hosts.split(',').map(str::to_owned).collect(),
        readers: vec![],
        validity: Default::default(),
    })?;
    Ok(())
}

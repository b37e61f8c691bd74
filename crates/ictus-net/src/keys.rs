//! The keys of a run across hosts (`ictus keys new`): a certificate authority of the
//! run, and per host a certificate naming it and its key, for Zenoh's TLS transport
//! with mutual authentication; per reader (a tool that may read the run, never write
//! it) a client certificate of its own.
//!
//! The directory it makes:
//!
//! ```text
//! DIR/ca.pem            the run's CA certificate: every host and reader verifies peers with it
//! DIR/ca/ca.key         the CA's key, apart (only `ictus keys` needs it, to add hosts later)
//! DIR/hosts/H.pem       host H's certificate (its name as CN and DNS name), signed by the CA
//! DIR/hosts/H.key       host H's key
//! DIR/readers/R.pem     reader R's certificate (CN `reader:R`), signed by the CA
//! DIR/readers/R.key     its key
//! DIR/bundles/hosts/H/  what host H needs and nothing more, to copy to it as it is:
//!                       ca.pem, hosts/H.pem, hosts/H.key, readers/*.pem (the readers
//!                       it lets in, without their keys)
//! DIR/bundles/readers/R/  what reader R needs: ca.pem, readers/R.pem, readers/R.key
//! ```
//!
//! A bundle has the layout of the whole directory, so it is given to `--keys` as it
//! is. The whole directory stays where it was made: with every private key and the
//! CA's in one place, one stolen copy would be every host. `ictus run` and `ictus
//! node` refuse a folder holding another host's, a reader's or the CA's private key
//! ([`crate::security::foreign_keys`]) unless told the hosts share it on purpose.
//!
//! Every file is mode 0600 and every folder 0700. The directory is made whole or not at
//! all: everything is generated and written into a sibling folder first, then renamed
//! into place; a `DIR` that exists and is not empty is refused and left as it is.
//!
//! ```no_run
//! use ictus_net::keys::{self, KeysRequest};
//! let made = keys::new(&KeysRequest {
//!     dir: "run-keys".into(),
//!     hosts: vec!["h1".into(), "h2".into()],
//!     readers: vec!["python".into()],
//! }).unwrap();
//! assert_eq!(made.hosts.len(), 2);
//! ```

use std::fs;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose,
};

/// The common name prefix of a reader's certificate: the access rules tell readers
/// from hosts by it.
pub const READER_PREFIX: &str = "reader:";

/// What to make.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeysRequest {
    /// The directory to make (it may exist if empty).
    pub dir: PathBuf,
    /// The hosts, by the names the schedule gives them.
    pub hosts: Vec<String>,
    /// Readers: tools that may read the run and never write it.
    pub readers: Vec<String>,
}

/// One certificate and its key, as written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Issued {
    /// The host's or reader's name.
    pub name: String,
    /// Its certificate.
    pub cert: PathBuf,
    /// Its key.
    pub key: PathBuf,
    /// Its bundle: the folder to copy to it, with only what it needs.
    pub bundle: PathBuf,
}

/// What [`new`] made.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Made {
    /// The CA's certificate.
    pub ca_cert: PathBuf,
    /// The CA's key (kept apart).
    pub ca_key: PathBuf,
    /// Per host.
    pub hosts: Vec<Issued>,
    /// Per reader.
    pub readers: Vec<Issued>,
}

/// Why keys were not made (nothing was written).
#[derive(Debug, thiserror::Error)]
pub enum KeysError {
    /// No host named.
    #[error("no host named: give the schedule's hosts, e.g. --hosts h1,h2,h3")]
    NoHosts,
    /// A name that cannot be a host's or reader's.
    #[error("'{name}' cannot name a {what}: {why}")]
    BadName {
        /// The name.
        name: String,
        /// `host` or `reader`.
        what: &'static str,
        /// What is wrong with it.
        why: &'static str,
    },
    /// The same name twice.
    #[error("'{name}' is named twice (hosts and readers share one namespace)")]
    Duplicate {
        /// The name.
        name: String,
    },
    /// The directory exists and holds something.
    #[error("{} exists and is not empty: keys are never written over (choose another directory, or remove it)", dir.display())]
    NotEmpty {
        /// The directory.
        dir: PathBuf,
    },
    /// Generating a key or a certificate failed.
    #[error("generating {what} failed: {source}")]
    Generate {
        /// What was being made.
        what: String,
        /// rcgen's error.
        #[source]
        source: rcgen::Error,
    },
    /// Writing failed (nothing is left behind).
    #[error("writing {} failed: {source}", path.display())]
    Io {
        /// The path.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}

/// Checks a host's or reader's name: a DNS label (letters, digits, `-`, 1 to 63
/// characters, not starting or ending with `-`), since it goes into the certificate
/// as a DNS name.
pub fn check_name(name: &str, what: &'static str) -> Result<(), KeysError> {
    let bad = |why| KeysError::BadName {
        name: name.to_string(),
        what,
        why,
    };
    if name.is_empty() || name.len() > 63 {
        return Err(bad("it must have 1 to 63 characters"));
    }
    if !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
        return Err(bad(
            "only letters, digits and '-' (it is a DNS name in the certificate)",
        ));
    }
    if name.starts_with('-') || name.ends_with('-') {
        return Err(bad("it may not start or end with '-'"));
    }
    Ok(())
}

/// Makes the CA, the hosts' and the readers' certificates and keys in `req.dir`, whole
/// or not at all.
pub fn new(req: &KeysRequest) -> Result<Made, KeysError> {
    if req.hosts.is_empty() {
        return Err(KeysError::NoHosts);
    }
    let mut seen = std::collections::BTreeSet::new();
    for (name, what) in req
        .hosts
        .iter()
        .map(|h| (h, "host"))
        .chain(req.readers.iter().map(|r| (r, "reader")))
    {
        check_name(name, what)?;
        if !seen.insert(name.as_str()) {
            return Err(KeysError::Duplicate { name: name.clone() });
        }
    }
    if let Ok(mut entries) = fs::read_dir(&req.dir)
        && entries.next().is_some()
    {
        return Err(KeysError::NotEmpty {
            dir: req.dir.clone(),
        });
    }

    // Everything in memory first.
    fn generate(what: &str) -> impl FnOnce(rcgen::Error) -> KeysError + use<> {
        let what = what.to_string();
        move |source| KeysError::Generate { what, source }
    }
    let ca_key = KeyPair::generate().map_err(generate("the CA's key"))?;
    let mut ca_params = CertificateParams::default();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    ca_params.distinguished_name = name_of("ictus run CA");
    validity(&mut ca_params);
    let ca_cert = ca_params
        .self_signed(&ca_key)
        .map_err(generate("the CA's certificate"))?;
    let issuer = Issuer::new(ca_params, &ca_key);

    let ca_pem = ca_cert.pem();
    let mut files: Vec<(PathBuf, String)> = vec![
        (PathBuf::from("ca.pem"), ca_pem.clone()),
        (PathBuf::from("ca/ca.key"), ca_key.serialize_pem()),
    ];
    let mut issue = |name: &str, folder: &str, cn: String, dns: bool| {
        let key = KeyPair::generate().map_err(generate(&format!("{name}'s key")))?;
        let mut params = if dns {
            CertificateParams::new(vec![name.to_string()])
                .map_err(generate(&format!("{name}'s certificate")))?
        } else {
            CertificateParams::default()
        };
        params.distinguished_name = name_of(&cn);
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        // Mutual TLS: every peer is both a server and a client.
        params.extended_key_usages = vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ];
        validity(&mut params);
        let cert = params
            .signed_by(&key, &issuer)
            .map_err(generate(&format!("{name}'s certificate")))?;
        let cert_path = PathBuf::from(folder).join(format!("{name}.pem"));
        let key_path = PathBuf::from(folder).join(format!("{name}.key"));
        let bundle = PathBuf::from("bundles").join(folder).join(name);
        let (cert_pem, key_pem) = (cert.pem(), key.serialize_pem());
        files.push((cert_path.clone(), cert_pem.clone()));
        files.push((key_path.clone(), key_pem.clone()));
        files.push((bundle.join(&cert_path), cert_pem));
        files.push((bundle.join(&key_path), key_pem));
        files.push((bundle.join("ca.pem"), ca_pem.clone()));
        Ok::<Issued, KeysError>(Issued {
            name: name.to_string(),
            cert: req.dir.join(cert_path),
            key: req.dir.join(key_path),
            bundle: req.dir.join(bundle),
        })
    };
    let hosts = req
        .hosts
        .iter()
        .map(|h| issue(h, "hosts", h.clone(), true))
        .collect::<Result<Vec<_>, _>>()?;
    let readers = req
        .readers
        .iter()
        .map(|r| issue(r, "readers", format!("{READER_PREFIX}{r}"), false))
        .collect::<Result<Vec<_>, _>>()?;
    // Each host's bundle lets in the run's readers: their certificates, never keys.
    let reader_certs: Vec<(PathBuf, String)> = files
        .iter()
        .filter(|(p, _)| p.starts_with("readers") && p.extension().is_some_and(|e| e == "pem"))
        .cloned()
        .collect();
    for h in &hosts {
        let bundle = PathBuf::from("bundles/hosts").join(&h.name);
        for (p, pem) in &reader_certs {
            files.push((bundle.join(p), pem.clone()));
        }
    }

    write_whole(&req.dir, &files)?;
    Ok(Made {
        ca_cert: req.dir.join("ca.pem"),
        ca_key: req.dir.join("ca/ca.key"),
        hosts,
        readers,
    })
}

fn name_of(cn: &str) -> DistinguishedName {
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, cn);
    dn.push(DnType::OrganizationName, "ictus");
    dn
}

/// Valid from the start of this year for ten years: a lab run's CA, not the web's.
fn validity(params: &mut CertificateParams) {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    // Years since 1970 by the mean Gregorian year: exact enough for a year boundary.
    let year = 1970 + (secs / 31_556_952) as i32;
    params.not_before = rcgen::date_time_ymd(year, 1, 1);
    params.not_after = rcgen::date_time_ymd(year + 10, 1, 1);
}

/// Writes `files` (relative paths) into a sibling of `dir`, then renames it to `dir`:
/// whole or not at all. Files 0600, folders 0700.
fn write_whole(dir: &Path, files: &[(PathBuf, String)]) -> Result<(), KeysError> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| KeysError::Io { path, source }
    };
    let parent = match dir.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let stem = dir
        .file_name()
        .map_or_else(|| "keys".into(), |n| n.to_string_lossy().into_owned());
    let staging = parent.join(format!(".{stem}.partial-{}", std::process::id()));
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&parent)
        .map_err(io(&parent))?;
    // Made fresh: a staging folder that exists (another run's, or planted) is
    // refused, never written into nor removed.
    fs::DirBuilder::new()
        .mode(0o700)
        .create(&staging)
        .map_err(io(&staging))?;
    let result = (|| {
        let mut builder = fs::DirBuilder::new();
        builder.recursive(true).mode(0o700);
        for (rel, text) in files {
            let path = staging.join(rel);
            if let Some(folder) = path.parent() {
                builder.create(folder).map_err(io(folder))?;
            }
            let mut f = fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&path)
                .map_err(io(&path))?;
            f.write_all(text.as_bytes()).map_err(io(&path))?;
            f.sync_all().map_err(io(&path))?;
        }
        // An empty `dir` may exist: it is replaced (rename cannot replace a folder
        // that is not empty, and the check above refused one).
        if dir.exists() {
            fs::remove_dir(dir).map_err(io(dir))?;
        }
        fs::rename(&staging, dir).map_err(io(dir))
    })();
    if result.is_err() {
        let _ = fs::remove_dir_all(&staging);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn names_are_dns_labels() {
        for good in ["h1", "main-host", "A9"] {
            assert!(check_name(good, "host").is_ok(), "{good}");
        }
        for bad in ["", "-h", "h-", "a.b", "h 1", "é", &"x".repeat(64)] {
            assert!(
                matches!(check_name(bad, "host"), Err(KeysError::BadName { .. })),
                "{bad}"
            );
        }
    }

    #[test]
    fn bad_requests_write_nothing() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("keys");
        let req = |hosts: &[&str], readers: &[&str]| KeysRequest {
            dir: dir.clone(),
            hosts: hosts.iter().map(|s| s.to_string()).collect(),
            readers: readers.iter().map(|s| s.to_string()).collect(),
        };
        assert!(matches!(new(&req(&[], &[])), Err(KeysError::NoHosts)));
        assert!(matches!(
            new(&req(&["h1", "h1"], &[])),
            Err(KeysError::Duplicate { .. })
        ));
        assert!(matches!(
            new(&req(&["h1"], &["h1"])),
            Err(KeysError::Duplicate { .. })
        ));
        assert!(matches!(
            new(&req(&["h/1"], &[])),
            Err(KeysError::BadName { .. })
        ));
        assert_eq!(fs::read_dir(root.path()).unwrap().count(), 0);
        fs::create_dir(&dir).unwrap();
        fs::write(dir.join("mine"), b"x").unwrap();
        assert!(matches!(
            new(&req(&["h1"], &[])),
            Err(KeysError::NotEmpty { .. })
        ));
        assert_eq!(fs::read(dir.join("mine")).unwrap(), b"x");
        assert_eq!(fs::read_dir(&dir).unwrap().count(), 1);
    }

    #[test]
    fn each_host_and_reader_has_a_bundle_with_only_its_own_key() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("keys");
        let sut = new(&KeysRequest {
            dir: dir.clone(),
            hosts: vec!["h1".into(), "h2".into()],
            readers: vec!["python".into()],
        })
        .unwrap();
        let files = |d: &Path| {
            let mut out = Vec::new();
            let mut stack = vec![d.to_path_buf()];
            while let Some(p) = stack.pop() {
                for e in fs::read_dir(&p).unwrap().flatten() {
                    if e.path().is_dir() {
                        stack.push(e.path());
                    } else {
                        out.push(e.path().strip_prefix(d).unwrap().display().to_string());
                    }
                }
            }
            out.sort();
            out
        };
        let h1 = &sut.hosts[0];
        assert_eq!(h1.bundle, dir.join("bundles/hosts/h1"));
        assert_eq!(
            files(&h1.bundle),
            [
                "ca.pem",
                "hosts/h1.key",
                "hosts/h1.pem",
                "readers/python.pem"
            ]
        );
        assert_eq!(
            files(&sut.readers[0].bundle),
            ["ca.pem", "readers/python.key", "readers/python.pem"]
        );
        // The same files as the whole directory's.
        assert_eq!(
            fs::read(h1.bundle.join("hosts/h1.key")).unwrap(),
            fs::read(&h1.key).unwrap()
        );
        assert_eq!(
            fs::read(h1.bundle.join("ca.pem")).unwrap(),
            fs::read(&sut.ca_cert).unwrap()
        );
        // A bundle is a keys folder of its own: its host's credentials load from it,
        // and nothing in it is another's private key.
        assert!(crate::security::Credentials::of_host(&h1.bundle, "h1").is_ok());
        assert!(crate::security::foreign_keys(&h1.bundle, "h1").is_empty());
        assert_eq!(
            crate::security::foreign_keys(&dir, "h1"),
            [
                "the CA's key (ca/ca.key)",
                "host h2's key",
                "reader python's key"
            ]
        );
    }

    #[test]
    fn a_staging_folder_that_exists_is_refused_not_written_into() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("keys");
        let staging = root
            .path()
            .join(format!(".keys.partial-{}", std::process::id()));
        fs::create_dir(&staging).unwrap();
        fs::write(staging.join("planted"), b"x").unwrap();
        let made = new(&KeysRequest {
            dir: dir.clone(),
            hosts: vec!["h1".into()],
            readers: vec![],
        });
        assert!(matches!(made, Err(KeysError::Io { .. })), "{made:?}");
        assert!(!dir.exists());
        assert_eq!(fs::read(staging.join("planted")).unwrap(), b"x");
    }

    #[test]
    fn the_keys_are_private_and_the_ca_key_apart() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("keys");
        fs::create_dir(&dir).unwrap(); // an empty folder is fine
        let sut = new(&KeysRequest {
            dir: dir.clone(),
            hosts: vec!["h1".into(), "h2".into()],
            readers: vec!["python".into()],
        })
        .unwrap();
        assert_eq!(sut.ca_key, dir.join("ca/ca.key"));
        assert_eq!(sut.hosts[1].cert, dir.join("hosts/h2.pem"));
        assert_eq!(sut.readers[0].key, dir.join("readers/python.key"));
        let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
        for f in [
            &sut.ca_cert,
            &sut.ca_key,
            &sut.hosts[0].key,
            &sut.readers[0].cert,
        ] {
            assert_eq!(mode(f), 0o600, "{}", f.display());
        }
        for d in [&dir, &dir.join("ca"), &dir.join("hosts")] {
            assert_eq!(mode(d), 0o700, "{}", d.display());
        }
        assert!(
            fs::read_to_string(&sut.ca_key)
                .unwrap()
                .contains("PRIVATE KEY")
        );
        // Nothing staged is left beside it.
        assert_eq!(fs::read_dir(root.path()).unwrap().count(), 1);
    }
}

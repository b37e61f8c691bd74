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
//! DIR/bundles/readers/R/  what reader R needs: ca.pem, readers/R.pem, readers/R.key,
//!                       hosts/*.pem (the hosts it takes data from, without their keys)
//! DIR/names             after `renew --retire` only: the certificates' names in
//!                       force (also in every bundle), see [`renew`]
//! ```
//!
//! Certificates are valid [`DEFAULT_DAYS`] (the CA [`DEFAULT_CA_DAYS`]) unless
//! asked otherwise ([`Validity`]); [`renew`] makes one holder's anew.
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
//!     validity: Default::default(),
//! }).unwrap();
//! assert_eq!(made.hosts.len(), 2);
//! ```

use std::collections::BTreeMap;
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
    /// How long the certificates are valid.
    pub validity: Validity,
}

/// How long certificates are valid, from the moment they are made (an hour before,
/// for clocks a little behind).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Validity {
    /// The hosts' and readers' certificates, in days: short, since a stolen key is
    /// good until its certificate expires ([`renew`] makes a new one).
    pub days: u32,
    /// The CA's certificate, in days: at least `days` (it signs the renewals).
    pub ca_days: u32,
}

/// The hosts' and readers' certificates' validity unless told: 90 days.
pub const DEFAULT_DAYS: u32 = 90;
/// The CA's certificate's validity unless told: 2 years.
pub const DEFAULT_CA_DAYS: u32 = 730;
/// The longest validity taken: 10 years.
pub const MAX_DAYS: u32 = 3650;

impl Default for Validity {
    fn default() -> Validity {
        Validity {
            days: DEFAULT_DAYS,
            ca_days: DEFAULT_CA_DAYS,
        }
    }
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
    /// A validity out of range, or a CA that would expire before what it signs.
    #[error(
        "certificates valid {days} days under a CA valid {ca_days} days: each must be 1 to 3650 days, the CA's at least the others'"
    )]
    Validity {
        /// The hosts' and readers' days.
        days: u32,
        /// The CA's days.
        ca_days: u32,
    },
    /// A name the keys folder has no certificate for (or whose CA cannot be read).
    #[error("{}: no certificate for '{name}' (made by `ictus keys new {} --hosts ...`?)", dir.display(), dir.display())]
    Unknown {
        /// The folder.
        dir: PathBuf,
        /// The name asked for.
        name: String,
    },
    /// The folder's `names` file cannot be read whole.
    #[error("{0}")]
    Names(String),
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
    let v = req.validity;
    if !(1..=MAX_DAYS).contains(&v.days) || !(v.days..=MAX_DAYS).contains(&v.ca_days) {
        return Err(KeysError::Validity {
            days: v.days,
            ca_days: v.ca_days,
        });
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
    validity(&mut ca_params, v.ca_days);
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
        let (cert_pem, key_pem) = certify(name, &cn, dns, v.days, &issuer)?;
        let cert_path = PathBuf::from(folder).join(format!("{name}.pem"));
        let key_path = PathBuf::from(folder).join(format!("{name}.key"));
        let bundle = PathBuf::from("bundles").join(folder).join(name);
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
    // Each host's bundle lets in the run's readers; each reader's bundle names the
    // run's hosts, whose certificates' names are the only peers it takes data from
    // (python/ictus/live), whatever else its TLS layer trusts.
    share_certificates(&mut files, "readers", "hosts", &hosts);
    share_certificates(&mut files, "hosts", "readers", &readers);

    write_whole(&req.dir, &files)?;
    Ok(Made {
        ca_cert: req.dir.join("ca.pem"),
        ca_key: req.dir.join("ca/ca.key"),
        hosts,
        readers,
    })
}

/// Copies every certificate of folder `from` (`hosts` or `readers`) in `files`, never
/// a key, into the bundle of each of `holders` (of folder `to`).
fn share_certificates(
    files: &mut Vec<(PathBuf, String)>,
    from: &str,
    to: &str,
    holders: &[Issued],
) {
    let certs: Vec<(PathBuf, String)> = files
        .iter()
        .filter(|(p, _)| p.starts_with(from) && p.extension().is_some_and(|e| e == "pem"))
        .cloned()
        .collect();
    for h in holders {
        let bundle = PathBuf::from("bundles").join(to).join(&h.name);
        files.extend(certs.iter().map(|(p, pem)| (bundle.join(p), pem.clone())));
    }
}

/// A new key and a certificate for `name` (common name `cn`, its DNS name when
/// `dns`), valid `days`, signed by `issuer`: both in PEM.
fn certify(
    name: &str,
    cn: &str,
    dns: bool,
    days: u32,
    issuer: &Issuer<'_, impl rcgen::SigningKey>,
) -> Result<(String, String), KeysError> {
    let generate = |what: &str| {
        let what = format!("{name}'s {what}");
        move |source| KeysError::Generate { what, source }
    };
    let key = KeyPair::generate().map_err(generate("key"))?;
    let mut params = if dns {
        CertificateParams::new(vec![name.to_string()]).map_err(generate("certificate"))?
    } else {
        CertificateParams::default()
    };
    params.distinguished_name = name_of(cn);
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    // Mutual TLS: every peer is both a server and a client.
    params.extended_key_usages = vec![
        ExtendedKeyUsagePurpose::ServerAuth,
        ExtendedKeyUsagePurpose::ClientAuth,
    ];
    validity(&mut params, days);
    let cert = params
        .signed_by(&key, issuer)
        .map_err(generate("certificate"))?;
    Ok((cert.pem(), key.serialize_pem()))
}

/// The file of a keys folder (and of every bundle) that names the certificates
/// retired holders now carry: one line `HOLDER CN` each, `HOLDER` the first
/// certificate's common name (`h2`, `reader:python`), `CN` the one in force
/// (`h2.2`). Absent: every holder carries its first.
pub const NAMES_FILE: &str = "names";

/// The common names in force in keys folder `dir` (holder to name; empty without a
/// `names` file). A file that cannot be read whole is an error: a host must not
/// start with a stolen certificate let back in.
pub fn common_names(dir: &Path) -> Result<std::collections::BTreeMap<String, String>, String> {
    let path = dir.join(NAMES_FILE);
    let text = match fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Default::default()),
        Err(e) => return Err(format!("{}: {e}", path.display())),
    };
    let mut names = std::collections::BTreeMap::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let mut w = line.split_whitespace();
        match (w.next(), w.next(), w.next()) {
            (Some(holder), Some(cn), None) => {
                names.insert(holder.to_string(), cn.to_string());
            }
            _ => {
                return Err(format!(
                    "{}:{}:1: expected `HOLDER NAME` (written by `ictus keys renew --retire`)",
                    path.display(),
                    n + 1
                ));
            }
        }
    }
    Ok(names)
}

/// Who [`renew`] makes a new certificate for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Holder<'a> {
    /// A host, by name.
    Host(&'a str),
    /// A reader, by name.
    Reader(&'a str),
}

/// Makes host's or reader's `who` key and certificate anew in keys folder `dir` (made
/// by [`new`], with the CA's key), valid `days`: in `dir` and in its bundle, each
/// file replaced whole.
///
/// Renewed alone, the old certificate stays good until it ends. `retire` shuts it
/// out at once, for a stolen key: Zenoh 1.10 checks no revocation list, but its
/// access rules match certificates by common name, so the new certificate gets a
/// name of its own (`h2.2`, then `h2.3`), written to the `names` file of the folder
/// and of every bundle, and a host whose `names` says so lets in only the new name:
/// the stolen certificate matches no rule and is denied everything. Copy the
/// `names` file to every host (it is public; no host is re-keyed) and the new bundle
/// to the renewed one; a host without the new `names` refuses the renewed one too.
pub fn renew(dir: &Path, who: Holder<'_>, days: u32, retire: bool) -> Result<Issued, KeysError> {
    let (name, folder, first, dns) = match who {
        Holder::Host(h) => (h, "hosts", h.to_string(), true),
        Holder::Reader(r) => (r, "readers", format!("{READER_PREFIX}{r}"), false),
    };
    let mut names = common_names(dir).map_err(KeysError::Names)?;
    let cn = next_common_name(&names, &first, retire);
    let cert_path = PathBuf::from(folder).join(format!("{name}.pem"));
    let key_path = PathBuf::from(folder).join(format!("{name}.key"));
    if !dir.join(&cert_path).exists() {
        return Err(KeysError::Unknown {
            dir: dir.to_path_buf(),
            name: name.to_string(),
        });
    }
    let issuer = ca_issuer(dir, days)?;
    let (cert_pem, key_pem) = certify(name, &cn, dns, days, &issuer)?;
    let bundle = PathBuf::from("bundles").join(folder).join(name);
    let mut files = vec![
        (cert_path.clone(), cert_pem.clone()),
        (key_path.clone(), key_pem.clone()),
        (bundle.join(&cert_path), cert_pem),
        (bundle.join(&key_path), key_pem),
    ];
    if retire {
        names.insert(first, cn);
        files.extend(names_files(dir, &names));
    }
    replace_all(dir, &files)?;
    Ok(Issued {
        name: name.to_string(),
        cert: dir.join(cert_path),
        key: dir.join(key_path),
        bundle: dir.join(bundle),
    })
}

/// The common name holder `first`'s renewed certificate gets: the one in force
/// (from `names`), or, retiring it, the next generation's (`h2.2`, then `h2.3`).
fn next_common_name(names: &BTreeMap<String, String>, first: &str, retire: bool) -> String {
    let current = names
        .get(first)
        .cloned()
        .unwrap_or_else(|| first.to_string());
    if !retire {
        return current;
    }
    let generation = current
        .strip_prefix(&format!("{first}."))
        .and_then(|g| g.parse::<u32>().ok())
        .unwrap_or(1);
    format!("{first}.{}", generation + 1)
}

/// An I/O error on `path`, for `map_err`.
fn io_at(path: &Path) -> impl FnOnce(std::io::Error) -> KeysError {
    let path = path.to_path_buf();
    move |source| KeysError::Io { path, source }
}

/// The CA of keys folder `dir`, read to sign a certificate valid `days`, which must
/// end before the CA's own.
fn ca_issuer(dir: &Path, days: u32) -> Result<Issuer<'static, KeyPair>, KeysError> {
    let ca_key_path = dir.join("ca").join("ca.key");
    let ca_key = fs::read_to_string(&ca_key_path).map_err(io_at(&ca_key_path))?;
    let ca_key = KeyPair::from_pem(&ca_key).map_err(|source| KeysError::Generate {
        what: format!("reading {}", ca_key_path.display()),
        source,
    })?;
    let ca_pem_path = dir.join("ca.pem");
    let ca_pem = fs::read_to_string(&ca_pem_path).map_err(io_at(&ca_pem_path))?;
    let issuer =
        Issuer::from_ca_cert_pem(&ca_pem, ca_key).map_err(|source| KeysError::Generate {
            what: format!("reading {}", ca_pem_path.display()),
            source,
        })?;
    // Never past the CA's own end: what it signed would outlive it.
    let ca_end = expires(&ca_pem_path).map_err(|why| KeysError::Unknown {
        dir: dir.to_path_buf(),
        name: why,
    })?;
    let end =
        std::time::SystemTime::now() + std::time::Duration::from_secs(u64::from(days) * 86_400);
    if !(1..=MAX_DAYS).contains(&days) || end > ca_end {
        return Err(KeysError::Validity {
            days,
            ca_days: ca_end
                .duration_since(std::time::SystemTime::now())
                .map_or(0, |d| (d.as_secs() / 86_400) as u32),
        });
    }
    Ok(issuer)
}

/// The `names` file saying `names`, for keys folder `dir` and each of its bundles
/// (paths relative to `dir`).
fn names_files(dir: &Path, names: &BTreeMap<String, String>) -> Vec<(PathBuf, String)> {
    let mut text = String::from(
        "# The certificates in force of holders whose earlier one was retired\n\
         # (`ictus keys renew --retire`): HOLDER NAME. Copy to every host.\n",
    );
    for (holder, cn) in names {
        text += &format!("{holder} {cn}\n");
    }
    let mut files = vec![(PathBuf::from(NAMES_FILE), text.clone())];
    for kind in ["hosts", "readers"] {
        for b in fs::read_dir(dir.join("bundles").join(kind))
            .into_iter()
            .flatten()
            .flatten()
        {
            let rel = PathBuf::from("bundles").join(kind).join(b.file_name());
            files.push((rel.join(NAMES_FILE), text.clone()));
        }
    }
    files
}

/// Writes each of `files` (relative to `dir`) beside its place, then renames all
/// over the old ones; on a failure, the new files written so far are removed.
fn replace_all(dir: &Path, files: &[(PathBuf, String)]) -> Result<(), KeysError> {
    let mut written = Vec::new();
    let result = (|| {
        for (rel, text) in files {
            let path = dir.join(rel);
            let temp = path.with_file_name(format!(
                ".{}.new-{}",
                rel.file_name()
                    .map_or_else(String::new, |n| n.to_string_lossy().into_owned()),
                std::process::id()
            ));
            let mut f = fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&temp)
                .map_err(io_at(&temp))?;
            written.push(temp.clone());
            f.write_all(text.as_bytes()).map_err(io_at(&temp))?;
            f.sync_all().map_err(io_at(&temp))?;
        }
        for ((rel, _), temp) in files.iter().zip(&written) {
            let path = dir.join(rel);
            fs::rename(temp, &path).map_err(io_at(&path))?;
        }
        Ok(())
    })();
    if result.is_err() {
        for temp in &written {
            let _ = fs::remove_file(temp);
        }
    }
    result
}

fn name_of(cn: &str) -> DistinguishedName {
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, cn);
    dn.push(DnType::OrganizationName, "ictus");
    dn
}

/// Valid from an hour ago (a clock a little behind) for `days` days.
fn validity(params: &mut CertificateParams, days: u32) {
    let now = std::time::SystemTime::now();
    params.not_before = (now - std::time::Duration::from_secs(3600)).into();
    params.not_after = (now + std::time::Duration::from_secs(u64::from(days) * 86_400)).into();
}

/// When the certificate in PEM file `path` expires.
pub fn expires(path: &Path) -> Result<std::time::SystemTime, String> {
    let text = fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let (_, pem) = x509_parser::pem::parse_x509_pem(&text)
        .map_err(|e| format!("{}: not a PEM certificate ({e})", path.display()))?;
    let cert = pem
        .parse_x509()
        .map_err(|e| format!("{}: not a certificate ({e})", path.display()))?;
    let secs = cert.validity().not_after.timestamp();
    Ok(std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs.max(0) as u64))
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

    /// Keys for hosts h1 and h2 and reader python, made in `dir`.
    fn two_hosts_and_a_reader(dir: &Path) -> Made {
        new(&KeysRequest {
            dir: dir.to_path_buf(),
            hosts: vec!["h1".into(), "h2".into()],
            readers: vec!["python".into()],
            validity: Validity::default(),
        })
        .unwrap()
    }

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
            validity: Validity::default(),
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
        let sut = two_hosts_and_a_reader(&dir);
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
            [
                "ca.pem",
                "hosts/h1.pem",
                "hosts/h2.pem",
                "readers/python.key",
                "readers/python.pem"
            ]
        );
        // A reader's bundle holds no host's key, only what names the hosts.
        assert_eq!(
            fs::read(sut.readers[0].bundle.join("hosts/h2.pem")).unwrap(),
            fs::read(&sut.hosts[1].cert).unwrap()
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
    fn certificates_last_the_days_asked_and_a_renewal_replaces_one_holders_files() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("keys");
        let request = |days, ca_days| KeysRequest {
            dir: dir.clone(),
            hosts: vec!["h1".into(), "h2".into()],
            readers: vec!["py".into()],
            validity: Validity { days, ca_days },
        };
        for (days, ca_days) in [(0, 30), (30, 29), (30, 3651)] {
            assert!(
                matches!(
                    new(&request(days, ca_days)),
                    Err(KeysError::Validity { .. })
                ),
                "{days} {ca_days}"
            );
        }
        let made = new(&request(7, 30)).unwrap();
        let days_left = |p: &Path| {
            let end = expires(p).unwrap();
            end.duration_since(std::time::SystemTime::now())
                .unwrap()
                .as_secs_f64()
                / 86_400.0
        };
        let h2 = &made.hosts[1];
        assert!((6.9..=7.0).contains(&days_left(&h2.cert)));
        assert!((29.9..=30.0).contains(&days_left(&made.ca_cert)));
        let (old_key, h1_key) = (
            fs::read(&h2.key).unwrap(),
            fs::read(&made.hosts[0].key).unwrap(),
        );
        let renewed = renew(&dir, Holder::Host("h2"), 20, false).unwrap();
        assert_eq!(renewed.cert, h2.cert);
        assert!((19.9..=20.0).contains(&days_left(&renewed.cert)));
        let new_key = fs::read(&renewed.key).unwrap();
        assert_ne!(new_key, old_key);
        // Its bundle has the new files; nothing of h1 changed; no file left behind.
        assert_eq!(
            fs::read(renewed.bundle.join("hosts/h2.key")).unwrap(),
            new_key
        );
        assert_eq!(
            fs::read(renewed.bundle.join("hosts/h2.pem")).unwrap(),
            fs::read(&renewed.cert).unwrap()
        );
        assert_eq!(fs::read(&made.hosts[0].key).unwrap(), h1_key);
        assert_eq!(
            fs::read_dir(dir.join("hosts")).unwrap().count(),
            4,
            "only h1's and h2's certificate and key"
        );
        // Signed by the same CA: the renewed certificate names it as its issuer.
        let pem = fs::read(&renewed.cert).unwrap();
        let (_, pem) = x509_parser::pem::parse_x509_pem(&pem).unwrap();
        let cert = pem.parse_x509().unwrap();
        assert_eq!(cert.issuer().to_string(), "CN=ictus run CA, O=ictus");
        // Not past the CA's end, not a name it does not know, not without the CA's key.
        assert!(matches!(
            renew(&dir, Holder::Host("h2"), 31, false),
            Err(KeysError::Validity { .. })
        ));
        assert!(matches!(
            renew(&dir, Holder::Host("h9"), 5, false),
            Err(KeysError::Unknown { .. })
        ));
        assert!(renew(&dir, Holder::Reader("py"), 5, false).is_ok());
        assert!(matches!(
            renew(&h2.bundle, Holder::Host("h2"), 5, false),
            Err(KeysError::Io { .. })
        ));
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
            validity: Validity::default(),
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
        let sut = two_hosts_and_a_reader(&dir);
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

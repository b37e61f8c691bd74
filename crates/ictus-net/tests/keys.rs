//! `ictus keys new`'s certificates chain to the run's CA and name their hosts; another
//! run's CA does not verify them.

use ictus_net::keys::{self, KeysRequest, READER_PREFIX};
use x509_parser::extensions::GeneralName;
use x509_parser::pem::parse_x509_pem;

fn pem_der(path: &std::path::Path) -> Vec<u8> {
    let text = std::fs::read(path).unwrap();
    let (_, pem) = parse_x509_pem(&text).unwrap();
    pem.contents
}

fn make(dir: &std::path::Path) -> keys::Made {
    keys::new(&KeysRequest {
        dir: dir.to_path_buf(),
        hosts: vec!["h1".into(), "h2".into(), "h3".into()],
        readers: vec!["python".into()],
        validity: Default::default(),
    })
    .unwrap()
}

#[test]
fn each_host_certificate_names_its_host_and_is_signed_by_the_runs_ca() {
    let root = tempfile::tempdir().unwrap();
    let sut = make(&root.path().join("keys"));
    let ca_der = pem_der(&sut.ca_cert);
    let (_, ca) = x509_parser::parse_x509_certificate(&ca_der).unwrap();
    assert!(ca.is_ca());
    for host in &sut.hosts {
        let der = pem_der(&host.cert);
        let (_, cert) = x509_parser::parse_x509_certificate(&der).unwrap();
        assert_eq!(cert.issuer(), ca.subject());
        cert.verify_signature(Some(ca.public_key())).unwrap();
        let cn = cert.subject().iter_common_name().next().unwrap();
        assert_eq!(cn.as_str().unwrap(), host.name);
        let san = cert.subject_alternative_name().unwrap().unwrap();
        assert!(
            san.value
                .general_names
                .iter()
                .any(|n| matches!(n, GeneralName::DNSName(d) if *d == host.name))
        );
        assert!(!cert.is_ca());
    }
    let reader_der = pem_der(&sut.readers[0].cert);
    let (_, reader) = x509_parser::parse_x509_certificate(&reader_der).unwrap();
    reader.verify_signature(Some(ca.public_key())).unwrap();
    let cn = reader.subject().iter_common_name().next().unwrap();
    assert_eq!(cn.as_str().unwrap(), format!("{READER_PREFIX}python"));
}

#[test]
fn another_runs_ca_does_not_verify_these_certificates() {
    let root = tempfile::tempdir().unwrap();
    let ours = make(&root.path().join("ours"));
    let theirs = make(&root.path().join("theirs"));
    let their_ca_der = pem_der(&theirs.ca_cert);
    let (_, their_ca) = x509_parser::parse_x509_certificate(&their_ca_der).unwrap();
    let der = pem_der(&ours.hosts[0].cert);
    let (_, cert) = x509_parser::parse_x509_certificate(&der).unwrap();
    assert!(cert.verify_signature(Some(their_ca.public_key())).is_err());
}

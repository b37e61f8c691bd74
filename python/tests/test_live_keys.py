"""Which peers a reader takes data from (ictus.live.host_names, access_rules; issue
31): the run's hosts, named by the certificates in its bundle's hosts/ and renamed by
its names file, and no one else. The session itself is tested against Zenoh in
crates/ictus-cli/tests/python.rs; these need no Zenoh."""

import sys
import tempfile
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ictus.live import access_rules, host_names  # noqa: E402


def bundle(root: Path, hosts, names=None) -> Path:
    (root / "hosts").mkdir(parents=True)
    for h in hosts:
        (root / "hosts" / f"{h}.pem").write_text("-----BEGIN CERTIFICATE-----\n")
    if names is not None:
        (root / "names").write_text(names)
    return root


class HostNames(unittest.TestCase):
    def test_each_host_certificate_names_a_host(self):
        with tempfile.TemporaryDirectory() as d:
            b = bundle(Path(d), ["h2", "h1", "h3"])
            (b / "hosts" / "h1.key").write_text("not read")
            self.assertEqual(host_names(b), ["h1", "h2", "h3"])

    def test_a_retired_host_is_known_by_its_name_in_force_only(self):
        with tempfile.TemporaryDirectory() as d:
            b = bundle(Path(d), ["h1", "h2"], "# renewed\nh2 h2.2\nreader:python reader:python.2\n")
            self.assertEqual(host_names(b), ["h1", "h2.2"])

    def test_a_folder_without_host_certificates_says_which_bundle_to_copy(self):
        with tempfile.TemporaryDirectory() as d:
            with self.assertRaises(FileNotFoundError) as e:
                host_names(d, "python")
            self.assertIn("bundles/readers/python/", str(e.exception))

    def test_a_names_line_that_is_not_two_words_is_refused_with_its_place(self):
        with tempfile.TemporaryDirectory() as d:
            b = bundle(Path(d), ["h1"], "h1 h1.2\nh2\n")
            with self.assertRaises(ValueError) as e:
                host_names(b)
            self.assertIn("names:2:1: expected `HOLDER NAME`", str(e.exception))


class AccessRules(unittest.TestCase):
    def test_default_deny_and_everything_allowed_with_the_hosts_only(self):
        rules = access_rules(["h1", "h2.2"])
        self.assertTrue(rules["enabled"])
        self.assertEqual(rules["default_permission"], "deny")
        self.assertEqual(rules["subjects"], [{"id": "hosts", "cert_common_names": ["h1", "h2.2"]}])
        (rule,) = rules["rules"]
        self.assertEqual(rule["permission"], "allow")
        self.assertEqual(sorted(rule["flows"]), ["egress", "ingress"])
        self.assertEqual(rule["key_exprs"], ["ictus/**"])
        self.assertIn("put", rule["messages"])
        self.assertIn("reply", rule["messages"])
        self.assertEqual(rules["policies"], [{"id": "hosts", "rules": ["with-hosts"], "subjects": ["hosts"]}])


if __name__ == "__main__":
    unittest.main()

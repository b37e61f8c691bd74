"""The examples in the package's docstrings run as written (those marked SKIP need
files of one's own: the README's and the tests' cover them)."""

import doctest
import unittest

import samples  # noqa: F401  (puts python/ on the path)

import ictus._need
import ictus.cells
import ictus.record
import ictus.recording
import ictus.survey


def load_tests(loader, tests, ignore):
    for module in (ictus._need, ictus.cells, ictus.record, ictus.recording, ictus.survey):
        tests.addTests(doctest.DocTestSuite(module))
    return tests


if __name__ == "__main__":
    unittest.main()

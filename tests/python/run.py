#!/usr/bin/env python3
"""Runs one file of the Python package's tests with pytest, for ctest.

    run.py tests/python/test_x.py      (PYTHONPATH holds build/python)

Exits 77 (skipped, with the reason) where NumPy or pytest is not installed
(Debian: python3-numpy, python3-pytest); pytest's "no tests ran" is a
failure, not a pass.
"""
import sys

for module, package in (("numpy", "python3-numpy"), ("pytest", "python3-pytest")):
    try:
        __import__(module)
    except ImportError:
        print("SKIP: %s is not installed for %s (Debian: %s)" % (module, sys.executable, package))
        sys.exit(77)

import pytest  # noqa: E402

rc = pytest.main(["-q", "-p", "no:cacheprovider", "-rs"] + sys.argv[1:])
sys.exit(1 if rc == 5 else int(rc))

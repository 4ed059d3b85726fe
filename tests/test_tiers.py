"""The tiers of tests/conftest.py (issue 48): `make test-fast` is the quick loop, so the tests that
check or build every doc against archive/ (seconds to minutes each) are `slow`, named there; a
name that no longer names a test would put its test back into make test-fast unnoticed."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tests import conftest

TESTS = Path(__file__).resolve().parent
ARCHIVE_FILES = ["test_docs_check.py", "test_report_claims.py", "test_web_archive_pages.py"]
# A call that checks or builds docs against archive/, importing the runs they cite (docs/archive.md).
WHOLE_CHECK = re.compile(r'invoke\("docs", "(?:check|build)"|doc_regions\.(?:check|build)\(|RunsDB\(REPO')


def _source(file: str, name: str) -> str:
    """The text of test `name` in tests/`file`, up to the next top-level definition."""
    text = (TESTS / file).read_text()
    return re.search(rf"^def {name}\(.*?(?=^\S)", text + "\nEND", re.M | re.S)[0]


def test_every_name_conftest_marks_slow_is_a_test_or_a_file():
    defined = {m for f in TESTS.glob("test_*.py") for m in re.findall(r"^def (test_\w+)\(", f.read_text(), re.M)}
    missing = sorted(conftest.SLOW_TESTS - defined)
    assert not missing, f"tests/conftest.py marks as slow tests that do not exist: {missing}"
    files = {f.name for f in TESTS.glob("test_*.py")}
    assert conftest.SLOW_FILES <= files, sorted(conftest.SLOW_FILES - files)


def test_make_test_fast_collects_no_whole_archive_check():
    makefile = (TESTS.parent / "Makefile").read_text()
    marks = re.search(r'^test-fast:\n\t@\S+ -m pytest -q -m "([^"]+)"', makefile, re.M)
    assert marks, "make test-fast's pytest line not found"
    out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                          "-m", marks[1], *(str(TESTS / f) for f in ARCHIVE_FILES)],
                         capture_output=True, text=True, cwd=TESTS.parent, timeout=300)
    ids = [line for line in out.stdout.splitlines() if "::" in line]
    assert ids, out.stdout + out.stderr  # the quick tests of those files are still there
    heavy = sorted(i for i in ids if WHOLE_CHECK.search(_source(i.split("::")[0].split("/")[-1],
                                                                i.split("::")[1].split("[")[0])))
    assert not heavy, f"make test-fast runs tests that check the docs against archive/: {heavy}"
    assert not any(i.startswith("tests/test_web_archive_pages.py") for i in ids), ids

#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""`make lint`: what the runs expect agrees with the code and with each other.

tests/suites.txt is the one manifest of the suites each run must produce (a
column per run, read by scripts/report/vm-verdict.py). This check fails when:
  - a row does not fit the header, or names a kind the verdict does not know;
  - a KUnit suite of the test flavour (a `#[kunit_tests(NAME)]` module under
    src/) is missing from the manifest, or is listed in a run that loads the
    test flavour's suites (test, kcsan) with another number of cases than its
    `#[test]` functions;
  - the manifest lists a KUnit suite that no module declares;
  - a suite of kind `stress` or `run` is expected by `make test` but not by
    `make test-kcsan`, which runs the same stress driver and verdict.

Usage: check-suites.py ROOT
"""

import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "report"))
import suites_manifest  # noqa: E402  (scripts/report/suites_manifest.py)
# The runs whose VM loads the test flavour with every KUnit suite.
KUNIT_RUNS = ("test", "kcsan")
SUITE = re.compile(r"kunit_tests\((\w+)\)\]\s*mod\s+\w+\s*\{")
TEST = re.compile(r"^\s*#\[test\]", re.M)


def module_body(text, start):
    """The text of the braces that open just before `start`."""
    depth, i = 1, start
    while depth and i < len(text):
        depth += {"{": 1, "}": -1}.get(text[i], 0)
        i += 1
    return text[start:i]


def kunit_suites(root):
    """{suite: number of #[test] functions} of the modules under src/."""
    files = subprocess.check_output(
        ["git", "ls-files", "-co", "--exclude-standard", "src/*.rs"], cwd=root, text=True
    ).split()
    suites = {}
    for f in files:
        path = os.path.join(root, f)
        if not os.path.isfile(path):
            continue
        text = open(path).read()
        for m in SUITE.finditer(text):
            n = len(TEST.findall(module_body(text, m.end())))
            suites[m.group(1)] = suites.get(m.group(1), 0) + n
    return suites


def main():
    root = sys.argv[1]
    path = os.path.join(root, "tests", "suites.txt")
    columns, rows, problems = suites_manifest.read(path)
    for run in KUNIT_RUNS:
        if run not in columns:
            problems.append(f"{path}: no column {run}")
    code = kunit_suites(root)
    listed = {}
    for suite, kind, runs in rows:
        if suite in listed:
            problems.append(f"{path}: {suite} is listed twice")
        listed[suite] = (kind, runs)
    for suite, n in sorted(code.items()):
        if suite not in listed:
            problems.append(f"KUnit suite {suite} ({n} cases) is not in {path}")
            continue
        kind, runs = listed[suite]
        if kind != "kunit":
            problems.append(f"{path}: {suite} is a KUnit suite, listed as {kind}")
        for run in KUNIT_RUNS:
            if runs.get(run) != n:
                problems.append(
                    f"{path}: {suite} has {n} cases in the code, column {run} expects {runs.get(run)}")
    for suite, (kind, runs) in sorted(listed.items()):
        if kind == "kunit" and suite not in code:
            problems.append(f"{path}: {suite} is listed as a KUnit suite that no module declares")
        if kind in ("stress", "run") and runs.get("test") is not None and runs.get("kcsan") is None:
            problems.append(f"{path}: {suite} runs in make test but make test-kcsan expects nothing of it")
    for p in problems:
        print(p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

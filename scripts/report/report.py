#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Merge host and VM test results into one report.

Reads `cargo test` output (libtest's "test NAME ... ok" lines and its failure
sections) and any number of VM verdicts written by vm-verdict.py; prints every
failure readably, writes all results as JUnit XML, and ends with the line
"N passed, N failed, N skipped". Exits non-zero on any failure, or when no test
ran at all.

Usage: report.py --junit OUT.xml [--host CARGO.log]... [--vm VERDICT.json]...
"""

import argparse
import json
import re
import sys
from xml.sax.saxutils import escape, quoteattr

CARGO_CASE = re.compile(r"^test (\S+) \.\.\. (ok|FAILED|ignored)")
CARGO_FAIL = re.compile(r"^---- (\S+) stdout ----")


def host_cases(path):
    lines = open(path, errors="replace").read().splitlines()
    logs, cur = {}, None
    for line in lines:
        m = CARGO_FAIL.match(line)
        if m:
            cur = m.group(1)
            logs[cur] = []
        elif cur and (line.startswith("failures:") or line.startswith("---- ")):
            cur = None
        elif cur:
            logs[cur].append(line)
    cases = []
    for line in lines:
        m = CARGO_CASE.match(line)
        if m:
            name, res = m.groups()
            status = {"ok": "PASS", "FAILED": "FAIL", "ignored": "SKIP"}[res]
            suite, _, case = name.rpartition("::")
            cases.append({"suite": "host." + (suite or "root"), "name": case,
                          "status": status, "log": logs.get(name, [])})
    if re.search(r"^error(\[E\d+\])?:", "\n".join(lines), re.M) and not cases:
        cases.append({"suite": "host", "name": "build", "status": "FAIL",
                      "log": [l for l in lines if l.startswith("error")][:20]})
    return cases


def junit(cases, path):
    suites = {}
    for c in cases:
        suites.setdefault(c["suite"], []).append(c)
    out = ['<?xml version="1.0" encoding="UTF-8"?>', "<testsuites>"]
    for name, cs in suites.items():
        fails = sum(c["status"] not in ("PASS", "SKIP") for c in cs)
        skips = sum(c["status"] == "SKIP" for c in cs)
        out.append(f"  <testsuite name={quoteattr(name)} tests=\"{len(cs)}\" "
                   f"failures=\"{fails}\" skipped=\"{skips}\">")
        for c in cs:
            out.append(f"    <testcase classname={quoteattr(name)} name={quoteattr(c['name'])}>")
            if c["status"] == "SKIP":
                out.append("      <skipped/>")
            elif c["status"] != "PASS":
                text = escape("\n".join(c["log"]))
                out.append(f"      <failure message={quoteattr(c['status'])}>{text}</failure>")
            out.append("    </testcase>")
        out.append("  </testsuite>")
    out.append("</testsuites>")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--junit", required=True)
    ap.add_argument("--host", action="append", default=[])
    ap.add_argument("--vm", action="append", default=[])
    args = ap.parse_args()

    cases = []
    for h in args.host:
        cases += host_cases(h)
    for v in args.vm:
        try:
            with open(v) as f:
                cases += json.load(f)["cases"]
        except (OSError, ValueError) as e:
            # A run that left no verdict failed before it could say anything.
            cases.append({"suite": "report", "name": v, "status": "FAIL",
                          "log": [f"no verdict: {e}"]})

    junit(cases, args.junit)
    passed = sum(c["status"] == "PASS" for c in cases)
    skipped = sum(c["status"] == "SKIP" for c in cases)
    failed = len(cases) - passed - skipped

    for c in cases:
        if c["status"] not in ("PASS", "SKIP"):
            print(f"FAILED {c['suite']}.{c['name']} ({c['status']})")
            for line in c["log"]:
                print(f"    {line}")
    by_suite = {}
    for c in cases:
        s = by_suite.setdefault(c["suite"], [0, 0, 0])
        s[{"PASS": 0, "SKIP": 2}.get(c["status"], 1)] += 1
    for name, (p, f, k) in by_suite.items():
        print(f"  {name}: {p} passed" + (f", {f} failed" if f else "") + (f", {k} skipped" if k else ""))
    print(f"JUnit XML: {args.junit}")
    print(f"{passed} passed, {failed} failed, {skipped} skipped")
    sys.exit(1 if failed or passed == 0 else 0)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Turn one VM run's outputs into a verdict.

Reads the results channel (one KTAP document per suite between
RMAD-SUITE-BEGIN/END markers, the kernel log, and the RMAD-VM-DONE line) and
the console log. Each suite document is parsed by the kernel's own
tools/testing/kunit/kunit.py parse. Besides the suites' test cases, the verdict
holds checks of the run itself, in the suite `rmad_vm_run` (or the name in the
environment variable RMAD_RUN_SUITE, when one run has several VMs):
`guest_completed` (the guest reached the end of its scenario instead of hanging
or crashing), `kernel_log_clean` (no WARNING, BUG, oops, lockdep, KASAN,
kmemleak, hung-task, soft-lockup, RCU-stall or workqueue-lockup report in the
console or the kernel log, outside the sections where the scenario makes a
detector fire on purpose), and `suites_as_expected` (every suite that the
manifest's column RUN lists ran with at least its number of cases, and no other
suite ran; suites that a KUnit filter leaves out count as skipped; a filter
that matches nothing fails).

Usage: vm-verdict.py KUNIT_PY RESULTS CONSOLE OUT.json MANIFEST RUN [FILTER]
"""

import fnmatch
import json
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import suites_manifest  # noqa: E402  (scripts/report/suites_manifest.py)

# Kernel reports that fail a run even when every KUnit verdict passed.
SPLAT = re.compile(
    r"WARNING:|BUG:|Oops|Kernel panic|kernel BUG|general protection fault|Call Trace:|"
    r"INFO: possible|INFO: task .* blocked for more than|detected stall|stall on CPU|"
    r"self-detected stall|soft lockup|hard LOCKUP|workqueue lockup|"
    r"inconsistent lock state|possible recursive locking|circular locking dependency|"
    r"Invalid wait context|DEBUG_LOCKS_WARN_ON|KASAN:|KCSAN:|UBSAN:|"
    r"unreferenced object|suspected memory leak|"
    r"sleeping function called from invalid context|scheduling while atomic|"
    r"panicked at|FAULT_INJECTION: forcing|enqueued on deprecated workqueue"
)
CONTROL = re.compile(r"RMAD-CONTROL-(BEGIN|END) (\S+)")
SUITE_BEGIN = re.compile(r"^RMAD-SUITE-BEGIN (\S+)")
TAIL_LINES = 40
# The suite of the run's own checks.
RUN_SUITE = os.environ.get("RMAD_RUN_SUITE", "rmad_vm_run")


def read(path):
    try:
        with open(path, errors="replace") as f:
            return f.read().replace("\r", "").splitlines()
    except FileNotFoundError:
        return []


def split_results(lines):
    """Returns ({suite: [lines]}, dmesg lines, completed?, scenario rc)."""
    suites, dmesg, cur, in_dmesg = {}, [], None, False
    completed, rc = False, None
    for line in lines:
        m = SUITE_BEGIN.match(line)
        if m:
            cur = m.group(1)
            suites[cur] = []
        elif line.startswith("RMAD-SUITE-END"):
            cur = None
        elif line == "RMAD-DMESG-BEGIN":
            in_dmesg = True
        elif line == "RMAD-DMESG-END":
            in_dmesg = False
        elif line.startswith("RMAD-VM-DONE"):
            completed = True
            rc = line.split("rc=", 1)[-1]
        elif cur is not None:
            suites[cur].append(line)
        elif in_dmesg:
            dmesg.append(line)
    return suites, dmesg, completed, rc


def case_logs(doc):
    """Diagnostic lines of each test case, keyed by name, from a KTAP document."""
    logs, pending = {}, []
    for line in doc:
        s = line.strip()
        m = re.match(r"(not ok|ok) \d+ (\S+)", s)
        if m:
            logs[m.group(2)] = pending
            pending = []
        elif s and not s.startswith(("# Subtest", "KTAP version", "1..")):
            # Diagnostics: "# …" lines and the assertion text that follows them.
            pending.append(s)
    return logs


def flatten(group, suite, out):
    for case in group.get("test_cases", []):
        out.append((suite, case["name"], case["status"]))
    for sub in group.get("sub_groups", []):
        flatten(sub, sub.get("name", suite), out)


def parse_suite(kunit_py, name, doc):
    """Runs kunit.py parse on one suite's document; returns (cases, parser output)."""
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, f"{name}.ktap")
        js = os.path.join(tmp, f"{name}.json")
        with open(src, "w") as f:
            f.write("\n".join(doc) + "\n")
        env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
        proc = subprocess.run(
            [sys.executable, kunit_py, "parse", f"--json={js}", src],
            capture_output=True, text=True, env=env,
        )
        cases = []
        if os.path.exists(js):
            with open(js) as f:
                flatten(json.load(f), name, cases)
        return cases, proc.stdout + proc.stderr, proc.returncode


def outside_controls(lines):
    """The lines outside RMAD-CONTROL-BEGIN/END sections (detectors firing on purpose)."""
    out, inside = [], None
    for line in lines:
        m = CONTROL.search(line)
        if m:
            inside = m.group(2) if m.group(1) == "BEGIN" else None
        elif inside is None:
            out.append(line)
    return out


def read_manifest(path, run):
    """[(suite, kind, min cases)] of column `run` of the manifest (tests/suites.txt)."""
    columns, rows, problems = suites_manifest.read(path)
    if problems or run not in columns[2:]:
        sys.exit("\n".join(problems + [f"{path}: no column '{run}'"]))
    return [(suite, kind, runs[run]) for suite, kind, runs in rows if runs[run] is not None]


def check_suites(manifest, cases, flt, where):
    """The suites_as_expected case, and a skipped count per suite left out."""
    counts = {}
    for c in cases:
        counts[c["suite"]] = counts.get(c["suite"], 0) + 1
    suite_glob = flt.split(".", 1)[0] if flt else ""
    problems, skipped, known = [], [], set()
    for suite, kind, least in manifest:
        known.add(suite)
        have = counts.get(suite, 0)
        filtered = bool(flt) and (
            (kind == "kunit" and not fnmatch.fnmatchcase(suite, suite_glob)) or kind == "stress")
        if filtered:
            if have == 0:
                skipped.append((suite, least))
            continue
        if have == 0:
            problems.append(f"suite {suite} did not run ({where} expects {least} cases)")
        elif have < least and not (flt and kind == "kunit"):
            problems.append(f"suite {suite} ran {have} cases, fewer than the {least} expected")
    for suite in sorted(counts):
        if suite not in known:
            problems.append(f"suite {suite} ran but is not listed in {where}")
    if flt:
        kunit_suites = {s for s, k, _ in manifest if k == "kunit"}
        if not any(c["suite"] in kunit_suites for c in cases):
            problems.append(f"the KUnit filter '{flt}' matched no test")
    return problems, skipped


def main():
    kunit_py, results_path, console_path, out_path, manifest_path, run = sys.argv[1:7]
    flt = sys.argv[7] if len(sys.argv) > 7 else ""
    kunit_py = os.path.abspath(kunit_py)
    console = read(console_path)
    suites, dmesg, completed, rc = split_results(read(results_path))

    cases = []
    for name, doc in sorted(suites.items()):
        parsed, output, code = parse_suite(kunit_py, name, doc)
        logs = case_logs(doc)
        if not parsed:
            cases.append({"suite": name, "name": "parse", "status": "FAIL",
                          "log": ["kunit.py parse found no test"] + output.splitlines()})
            continue
        for suite, case, status in parsed:
            cases.append({"suite": suite, "name": case, "status": status,
                          "log": logs.get(case, []) if status != "PASS" else []})
        if code != 0 and all(c["status"] == "PASS" for c in cases if c["suite"] == name):
            cases.append({"suite": name, "name": "parse", "status": "FAIL",
                          "log": output.splitlines()})

    tail = console[-TAIL_LINES:]
    cases.append({
        "suite": RUN_SUITE, "name": "guest_completed",
        "status": "PASS" if completed else "FAIL",
        "log": [] if completed else
        ["the guest did not finish its scenario (hung, crashed or timed out); console tail:"] + tail,
    })
    logs = outside_controls(console) + outside_controls(dmesg)
    splats = sorted({l for l in logs if SPLAT.search(l)}, key=logs.index)
    cases.append({
        "suite": RUN_SUITE, "name": "kernel_log_clean",
        "status": "FAIL" if splats else "PASS",
        "log": ["kernel reports in the VM log:"] + splats[:60] if splats else [],
    })
    where = f"column {run} of tests/suites.txt"
    problems, skipped = check_suites(read_manifest(manifest_path, run), cases, flt, where)
    cases.append({"suite": RUN_SUITE, "name": "suites_as_expected",
                  "status": "FAIL" if problems else "PASS", "log": problems})
    for suite, least in skipped:
        for i in range(least):
            cases.append({"suite": suite, "name": f"left_out_by_filter_{i + 1}",
                          "status": "SKIP", "log": []})
    if completed and rc not in (None, "0"):
        cases.append({"suite": RUN_SUITE, "name": "scenario_exit_status",
                      "status": "FAIL", "log": [f"scenario exited with {rc}"]})

    with open(out_path, "w") as f:
        json.dump({"cases": cases}, f, indent=1)


if __name__ == "__main__":
    main()

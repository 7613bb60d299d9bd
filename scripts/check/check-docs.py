#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Checks that the documentation and the tree agree, for `make lint`:

  map        every file under src/ is named (as `src/...`) in
             Documentation/architecture.md, and every src/ path named there
             exists;
  citations  no file of src/, include/, samples/ and tests/ cites mad-spec.md
             (which is not in the repository); a file that cites sections
             (`§N.M`) names Documentation/behaviour.md, and each section it
             cites is a heading of that page.

Usage: check-docs.py map|citations ROOT. Prints what is wrong; exits 1 if anything is.
"""
import os
import re
import subprocess
import sys


def tracked(root, *paths):
    out = subprocess.check_output(["git", "-C", root, "ls-files", "-co", "--exclude-standard", *paths],
                                  text=True)
    return [p for p in out.splitlines() if os.path.exists(os.path.join(root, p))]


def check_map(root):
    page = open(os.path.join(root, "Documentation/architecture.md")).read()
    named = set(re.findall(r"`(src/[\w./-]+)`", page))
    bad = 0
    for f in tracked(root, "src"):
        if f not in named:
            print("Documentation/architecture.md does not name %s" % f)
            bad += 1
    for f in sorted(named):
        if not os.path.exists(os.path.join(root, f)):
            print("Documentation/architecture.md names %s, which does not exist" % f)
            bad += 1
    return bad


def check_citations(root):
    ref = open(os.path.join(root, "Documentation/behaviour.md")).read()
    sections = set(re.findall(r"^#+ (\d+(?:\.\d+)*)\.? ", ref, re.M))
    bad = 0
    for f in tracked(root, "src", "include", "samples", "tests"):
        try:
            text = open(os.path.join(root, f)).read()
        except UnicodeDecodeError:
            continue
        if "§" not in text:
            continue
        if "behaviour.md" not in text:
            print("%s: cites sections (§) without naming Documentation/behaviour.md" % f)
            bad += 1
        for n, line in enumerate(text.splitlines(), 1):
            if "mad-spec" in line:
                print("%s:%d: cites mad-spec.md, which is not in the repository" % (f, n))
                bad += 1
            for sec in re.findall(r"§ ?(\d+(?:\.\d+)*)", line):
                if sec.rstrip(".") not in sections:
                    print("%s:%d: §%s is not a section of Documentation/behaviour.md" % (f, n, sec))
                    bad += 1
    return bad


def main():
    checks = {"map": check_map, "citations": check_citations}
    if len(sys.argv) != 3 or sys.argv[1] not in checks:
        sys.exit(__doc__)
    sys.exit(1 if checks[sys.argv[1]](sys.argv[2]) else 0)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""List the distinct data races a KCSAN run reported.

Each KCSAN report starts with "BUG: KCSAN: data-race in A / B" (or "... in A")
and names the two accesses' functions. Reports that name a function of rmad
(its Rust symbols carry "rmad_main", its C glue is "rmad_*") come first. The
positive control's reports (between RMAD-CONTROL markers) are counted apart.

Usage: kcsan-summary.py CONSOLE.log
"""

import collections
import re
import sys

REPORT = re.compile(r"BUG: KCSAN: (\S+) in (.*)$")
CONTROL = re.compile(r"RMAD-CONTROL-(BEGIN|END)")


def main():
    counts = collections.Counter()
    control, inside = 0, False
    for line in open(sys.argv[1], errors="replace"):
        c = CONTROL.search(line)
        if c:
            inside = c.group(1) == "BEGIN"
            continue
        m = REPORT.search(line)
        if m and inside:
            control += 1
        elif m:
            counts[(m.group(1), m.group(2).strip())] += 1
    print(f"KCSAN positive control: {control} reports of the deliberate race")
    ours = {k: n for k, n in counts.items() if "rmad" in k[1]}
    others = {k: n for k, n in counts.items() if k not in ours}
    print(f"KCSAN: {sum(counts.values())} reports, {len(counts)} distinct; "
          f"{len(ours)} distinct involve rmad")
    for title, group in (("involving rmad", ours), ("elsewhere in the kernel", others)):
        if group:
            print(f"  {title}:")
            for (kind, where), n in sorted(group.items(), key=lambda x: -x[1]):
                print(f"    {n:4} x {kind} in {where}")


if __name__ == "__main__":
    main()

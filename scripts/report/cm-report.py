#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""The bench row cm: cmtime's tables from tests/vm/cm-bench.sh's console (node a), per layer
(the stock CM, the CM on rmad), as medians over the runs: connections set up and torn down per
second, and each step's microseconds per connection.

Usage: cm-report.py CONSOLE OUT.md. Prints the table and writes it to OUT.md.
"""
import re
import statistics
import sys

STEPS = ["create id", "bind addr", "resolve addr", "resolve route", "create qp", "connect",
         "disconnect", "destroy"]


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    conns = None
    runs = {}  # layer -> run -> step -> (total ms, us per connection)
    for line in open(sys.argv[1], errors="replace"):
        m = re.search(r"cm-bench: conns (\d+)", line)
        if m:
            conns = int(m.group(1))
        m = re.search(r"cm-bench: (\w+) (\d+): ([a-z ]+?)\s*:\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)",
                      line)
        if m:
            layer, run, step = m.group(1), int(m.group(2)), m.group(3).strip()
            runs.setdefault(layer, {}).setdefault(run, {})[step] = (float(m.group(4)),
                                                                    float(m.group(7)))
    failures = [l.strip() for l in open(sys.argv[1], errors="replace")
                if re.search(r"cm-bench: .*(failed|did not load|setup failed)", l)]
    out = []
    if not conns or not runs:
        out.append("cm: no figures (%s)" % ("; ".join(failures) or "no cmtime table in the console"))
    else:
        layers = [l for l in ("stock", "rmad") if l in runs]
        steps = [s for s in STEPS if any(s in r for l in layers for r in runs[l].values())]
        out.append("cm: cmtime, %d connections per run, medians of %s runs (stock: before and "
                   "after the runs on rmad, same boot)"
                   % (conns, "/".join(str(len(runs[l])) for l in layers)))
        out.append("")
        out.append("| figure | " + " | ".join("%s CM" % l for l in layers) + " |")
        out.append("| --- |" + " ---: |" * len(layers))

        def med(layer, step, i):
            vals = [r[step][i] for r in runs[layer].values() if step in r]
            return statistics.median(vals) if vals else None

        for label, step in (("connections set up per second", "connect"),
                            ("connections torn down per second", "disconnect")):
            cells = []
            for l in layers:
                total = med(l, step, 0)
                cells.append("%.0f" % (conns / (total / 1000.0)) if total else "-")
            out.append("| %s | %s |" % (label, " | ".join(cells)))
        for step in steps:
            cells = []
            for l in layers:
                v = med(l, step, 1)
                cells.append("%.0f" % v if v is not None else "-")
            out.append("| %s, µs per connection | %s |" % (step, " | ".join(cells)))
        if failures:
            out.append("")
            out.extend("failed: " + f for f in failures)
    text = "\n".join(out) + "\n"
    sys.stdout.write(text)
    open(sys.argv[2], "w").write(text)


if __name__ == "__main__":
    main()

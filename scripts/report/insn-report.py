#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""The tables of `make bench BENCH_INSN=1`: instructions per operation.

Usage: insn-report.py CONSOLE PLUGIN_LOG OUT_DIR
       insn-report.py --self-test   (make lint: the parsing on a made-up run)

CONSOLE is the guest's console: a "bench-insn-run: n=N" line at each load of
the benchmark, then one "bench-insn: {...}" line per figure, saying which
counted windows it summed (id, first, last: their numbers among the ends of
that id in the load) and how many operations they held; its "bench-json:"
lines are the times of the same run; with the profile, "bench-ksym:" lines
after each load are the guest's text symbols. PLUGIN_LOG is the log of
tools/insncount/: "M <id> <total>" at each marker (id 80 starts a load; an
even id starts a window, the next odd one ends it) and, with profile=on,
"P <block> <instructions>" lines after each end, closed by "T".

Writes OUT_DIR/insn.md (the table, also printed), OUT_DIR/insn.json and,
with a profile, OUT_DIR/insn-profile.txt (the functions of each figure's
windows, instructions per operation).
"""

import bisect
import collections
import json
import os
import re
import statistics
import sys

RUN_ID = 80
IMPLS = ["c", "rmad", "rmad-capi", "floor"]
IMPL_TITLES = {"c": "C layer", "rmad": "rmad Rust API", "rmad-capi": "rmad C API",
               "floor": "floor"}
# The rows, in the order of the table, with what one operation is.
ROWS = [
    ("post", "post (the call)"),
    ("settle", "post until the device completed it"),
    ("create_free", "create + free"),
    ("timeouts", "a timeout, from expiry until its handler ran"),
    ("unregister", "unregistration, per outstanding send"),
    ("cancel", "cancel, until its flush was delivered"),
    ("match", "matched response, from its release until its handler ran"),
    ("transaction", "transaction (create, post, answered, handler, free)"),
    ("modify", "modify (the call)"),
]
# The same rows in the time table, where a cancel and a modify are timed as calls alone.
TIME_ROWS = [(op, {"cancel": "cancel (the call)"}.get(op, title)) for op, title in ROWS]
TOP = 30


class Run:
    """One load of the benchmark, as the plugin saw it."""

    def __init__(self):
        # id of a window's start -> {its number among the ends: instructions}
        self.windows = collections.defaultdict(dict)
        # id -> {number: Counter(block -> instructions)}, with a profile
        self.profiles = collections.defaultdict(dict)
        # id -> {number: Counter(block -> times it ran)}, with a profile
        self.runs = collections.defaultdict(dict)
        self.ends = collections.Counter()
        self.open = {}


def read_plugin(path):
    """The loads in the plugin's log, in order."""
    runs = []
    run = None
    profile_of = None
    with open(path, errors="replace") as f:
        for line in f:
            parts = line.split()
            if not parts:
                continue
            if parts[0] == "M" and len(parts) == 3:
                mid, total = int(parts[1]), int(parts[2])
                profile_of = None
                if mid == RUN_ID:
                    run = Run()
                    runs.append(run)
                    continue
                if run is None:
                    continue
                if mid % 2 == 0:
                    run.open[mid] = total
                    continue
                start = mid - 1
                seq = run.ends[start]
                run.ends[start] += 1
                if start in run.open:
                    run.windows[start][seq] = total - run.open.pop(start)
                    profile_of = (start, seq)
                    run.profiles[start][seq] = collections.Counter()
                    run.runs[start][seq] = collections.Counter()
            elif parts[0] == "P" and profile_of and len(parts) == 4:
                start, seq = profile_of
                run.profiles[start][seq][int(parts[1], 16)] += int(parts[2])
                run.runs[start][seq][int(parts[1], 16)] += int(parts[3])
            elif parts[0] == "T":
                profile_of = None
    return runs


def read_console(path):
    """The figures' window lines and the times, by load; the symbols of each load."""
    figures, times, ksyms = [], [], []
    load = -1
    with open(path, errors="replace") as f:
        for line in f:
            if "bench-insn-run:" in line:
                load += 1
                ksyms.append([])
                continue
            m = re.search(r"bench-insn: (\{.*\})", line)
            if m:
                d = json.loads(m.group(1))
                d["load"] = load
                figures.append(d)
                continue
            m = re.search(r"bench-json: (\{.*\})", line)
            if m:
                times.append(json.loads(m.group(1)))
                continue
            m = re.search(r"bench-ksym: ([0-9a-f]+) [tT] (\S+)(\s+\[(\S+)\])?", line)
            if m and load >= 0:
                name = m.group(2) + (f" [{m.group(4)}]" if m.group(4) else "")
                ksyms[load].append((int(m.group(1), 16), name))
    return figures, times, ksyms


def counted(figures, runs):
    """Each figure's instructions per operation, or None where its windows are not all there."""
    out = []
    for d in figures:
        if d["load"] < 0 or d["load"] >= len(runs):
            continue
        wins = runs[d["load"]].windows[d["id"]]
        seqs = range(d["first"], d["last"] + 1)
        have = [wins[s] for s in seqs if s in wins]
        ok = len(have) == d["windows"] == len(seqs)
        out.append(dict(d, insns=sum(have) if ok else None,
                        per_op=sum(have) / d["ops"] if ok and d["ops"] else None))
    return out


def fmt(v):
    return "—" if v is None else f"{v:,.0f}".replace(",", " ")


def median(vs):
    vs = [v for v in vs if v is not None]
    return statistics.median(vs) if vs else None


def table(rows, ns, value_of, unit):
    """A markdown table: one line per row and N, a column per implementation."""
    lines = [f"| {unit} | N | " + " | ".join(IMPL_TITLES[i] for i in IMPLS) + " |",
             "| --- | ---: | " + " | ".join("---:" for _ in IMPLS) + " |"]
    for op, title in rows:
        for n in ns:
            vals = [value_of(i, op, n) for i in IMPLS]
            if all(v is None for v in vals):
                continue
            lines.append(f"| {title} | {n} | " + " | ".join(fmt(v) for v in vals) + " |")
    return lines


def spread(results):
    """The largest relative spread between repetitions of one figure, in %."""
    by = collections.defaultdict(list)
    for r in results:
        if r["per_op"] is not None:
            by[(r["impl"], r["op"], r["n"])].append(r["per_op"])
    worst = 0.0
    for vs in by.values():
        if len(vs) > 1 and min(vs) > 0:
            worst = max(worst, (max(vs) - min(vs)) / min(vs) * 100)
    return worst, max((len(v) for v in by.values()), default=0)


def demangle(name):
    """A Rust symbol (v0 mangling, "_R...") as its path of identifiers; others as they are.

    Not a full demangler: the identifiers of the path, in order, which is what a reader
    of a profile needs ("rmad_main::engine::agent::queues::Agent::apply_to").
    """
    sym, _, module = name.partition(" ")
    if not sym.startswith("_R"):
        return name
    # A crate's disambiguator ("Cs" base-62 "_") holds digits that would read as lengths.
    sym = re.sub(r"Cs[0-9A-Za-z]*_", "C", sym)
    idents, i = [], 2
    while i < len(sym):
        m = re.match(r"(\d+)_?", sym[i:])
        if not m or m.group(1).startswith("0"):
            i += 1
            continue
        n = int(m.group(1))
        start = i + len(m.group(0))
        ident = sym[start:start + n]
        if len(ident) == n and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", ident):
            idents.append(ident)
            i = start + n
        else:
            i += 1
    return ("::".join(idents) or sym) + (" " + module if module else "")


def profile(results, runs, ksyms, path):
    """Per figure, the functions its windows ran, instructions per operation."""
    with open(path, "w") as f:
        for r in results:
            load = r["load"]
            if r["per_op"] is None or not runs[load].profiles.get(r["id"]):
                continue
            syms = sorted(ksyms[load]) if load < len(ksyms) else []
            addrs = [a for a, _ in syms]
            by_fn, calls = collections.Counter(), collections.Counter()
            for seq in range(r["first"], r["last"] + 1):
                ran = runs[load].runs[r["id"]].get(seq, {})
                for block, count in runs[load].profiles[r["id"]].get(seq, {}).items():
                    k = bisect.bisect_right(addrs, block) - 1
                    name = demangle(syms[k][1]) if k >= 0 else f"{block:#x}"
                    by_fn[name] += count
                    # A run of the block at the function's first byte is a call of it.
                    if k >= 0 and syms[k][0] == block:
                        calls[name] += ran.get(block, 0)
            f.write(f"== {r['impl']} {r['op']} n={r['n']} rep={r['rep']}: "
                    f"{r['per_op']:.0f} instructions per operation "
                    "(per operation: instructions, calls)\n")
            for name, count in by_fn.most_common(TOP):
                f.write(f"  {count / r['ops']:10.1f} {calls[name] / r['ops']:7.2f}  {name}\n")
            f.write("\n")


def self_test():
    """Checks the pairing, the division and the demangling on a made-up run (`make lint`)."""
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        log, con = os.path.join(d, "plugin.log"), os.path.join(d, "console.log")
        with open(log, "w") as f:
            # A load; two windows of the C layer's post (ids 2, 3), one nested in a settle
            # (ids 4, 5); a window of another load's numbering is not theirs.
            f.write("M 80 0\nM 4 100\nM 2 110\nM 3 210\nM 5 1110\nM 2 2000\nM 3 2300\n"
                    "P ffffffff81000010 7 1\nT\nM 80 5000\nM 2 6000\nM 3 6001\n")
        with open(con, "w") as f:
            f.write("[ 1.0] bench-insn-run: n=10\n"
                    '[ 1.1] bench-insn: {"impl": "c", "op": "post", "n": 10, "rep": 0, "id": 2, '
                    '"first": 0, "last": 1, "windows": 2, "ops": 20}\n'
                    '[ 1.2] bench-insn: {"impl": "c", "op": "settle", "n": 10, "rep": 0, '
                    '"id": 4, "first": 0, "last": 0, "windows": 1, "ops": 10}\n'
                    '[ 1.3] bench-insn: {"impl": "c", "op": "modify", "n": 10, "rep": 0, '
                    '"id": 2, "first": 3, "last": 3, "windows": 1, "ops": 1}\n'
                    "bench-ksym: ffffffff81000000 T _stext\n")
        runs = read_plugin(log)
        figures, _, ksyms = read_console(con)
        got = [(r["op"], r["per_op"]) for r in counted(figures, runs)]
        assert got == [("post", 20.0), ("settle", 101.0), ("modify", None)], got
        assert runs[0].profiles[2][1] == {0xffffffff81000010: 7}, runs[0].profiles
        assert runs[0].runs[2][1] == {0xffffffff81000010: 1}, runs[0].runs
        assert ksyms == [[(0xffffffff81000000, "_stext")]], ksyms
    assert demangle("_RNvNtNtCse4lvjNbR0cw_9rmad_main3mad5state4step [rmad]") == \
        "rmad_main::mad::state::step [rmad]"
    assert demangle("kfree") == "kfree"
    print("insn-report: self-test passed")


def main():
    if sys.argv[1:] == ["--self-test"]:
        self_test()
        return
    console, plugin_log, out = sys.argv[1:4]
    runs = read_plugin(plugin_log)
    figures, times, ksyms = read_console(console)
    results = counted(figures, runs)
    ns = sorted({r["n"] for r in results})

    def insn_of(impl, op, n):
        return median(r["per_op"] for r in results
                      if r["impl"] == impl and r["op"] == op and r["n"] == n)

    def time_of(impl, op, n):
        vs = [t["value"] for t in times if t["impl"] == impl and t["op"] == op
              and t["n"] == n and t["unit"] == "ns"]
        if not vs:
            return None
        # Settle, timeouts and unregister are times for N sends in all: per send here.
        per = n if op in ("settle", "timeouts", "unregister") else 1
        return median(vs) / per

    worst, reps = spread(results)
    missing = sum(1 for r in results if r["per_op"] is None)
    lines = ["# Instructions per operation", "",
             f"{len(results)} figures counted from {len(runs)} loads"
             f" ({missing} without all their windows); {reps} repetition(s) each"
             + (f", largest spread between them {worst:.2f} %" if reps > 1 else "") + ".", ""]
    lines += table(ROWS, ns, insn_of, "instructions per operation")
    lines += ["", "Times of the same run (ns per operation; under the counting QEMU,"
              " one host thread for every vCPU: slower than `make bench`'s):", ""]
    lines += table(TIME_ROWS, ns, time_of, "ns per operation")
    text = "\n".join(lines) + "\n"
    print(text)
    with open(os.path.join(out, "insn.md"), "w") as f:
        f.write(text)
    with open(os.path.join(out, "insn.json"), "w") as f:
        json.dump([{k: r[k] for k in ("impl", "op", "n", "rep", "windows", "ops", "insns",
                                      "per_op")} for r in results], f, indent=1)
    if any(run.profiles and any(run.profiles.values()) for run in runs):
        profile(results, runs, ksyms, os.path.join(out, "insn-profile.txt"))
    if not results:
        sys.exit("insn-report: no counted figure (did the plugin run?)")


if __name__ == "__main__":
    main()

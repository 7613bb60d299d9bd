#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Turn the "bench-json:" lines of a `make bench` console log into
results.json, results.md and cost-vs-n.svg.

Usage: bench-report.py CONSOLE.log OUTDIR [KERNEL]

KERNEL (bench, the default, or test) names the kernel the figures come from;
every row of results.json carries it, and results.md says it first.

Each console line carries one repetition of one figure; every figure here is
the median of its repetitions with their min and max. Figures only: nothing
is asserted.
"""

import json
import math
import re
import statistics
import sys
from pathlib import Path

IMPLS = ["c", "rmad", "rmad-capi", "floor"]
OPS = ["post", "modify", "cancel", "create_free", "transaction", "match", "rtt", "settle",
       "timeouts", "unregister",
       "irqoff_ops", "irqoff_cancel", "irqoff_timeouts", "irqoff_unregister", "irqoff_removal", "irqoff_max",
       "irqoff_holds", "irqoff_hold_p50", "irqoff_hold_p99", "irqoff_hold_p999", "irqoff_hold_max",
       "irqoff_holds_over_100us",
       "memory", "sends_1cpu", "sends_2cpu_2agents", "sends_2cpu_1agent",
       "served"]
# What each figure is, for the table.
OP_TEXT = {
    "post": "`post` per call",
    "modify": "`modify` per call",
    "cancel": "`cancel` per call",
    "create_free": "`create_free`: a buffer created and freed",
    "transaction": "`transaction`: create, post, answer, handler, free",
    "match": "`match` per response",
    "rtt": "`rtt` per round trip",
    "settle": "`settle`: N sends to the device",
    "timeouts": "`timeouts`: N delivered",
    "unregister": "`unregister`: N flushed",
    "irqoff_ops": "`irqoff_ops`: post … round trips",
    "irqoff_cancel": "`irqoff_cancel`: the cancels",
    "irqoff_timeouts": "`irqoff_timeouts`: N timeouts",
    "irqoff_unregister": "`irqoff_unregister`: N flushed",
    "irqoff_removal": "`irqoff_removal`: device removed, N held",
    "irqoff_max": "`irqoff_max`: the whole round",
    "irqoff_holds": "`irqoff_holds`: rmad's agent-lock holds",
    "irqoff_hold_p50": "`irqoff_hold_p50`: half the holds under",
    "irqoff_hold_p99": "`irqoff_hold_p99`: 99 % of the holds under",
    "irqoff_hold_p999": "`irqoff_hold_p999`: 99.9 % of the holds under",
    "irqoff_hold_max": "`irqoff_hold_max`: the longest hold",
    "irqoff_holds_over_100us": "`irqoff_holds_over_100us`: holds over 100 µs",
    "memory": "`memory` per send",
    "sends_1cpu": "`sends_1cpu`: one CPU, one agent",
    "sends_2cpu_2agents": "`sends_2cpu_2agents`: two CPUs, two agents",
    "sends_2cpu_1agent": "`sends_2cpu_1agent`: two CPUs, one agent",
    "served": "`served`: requests answered (two nodes)",
}
# Up to this N every figure repeats its round (BENCH_REPEAT_N of src/testing/bench/impl.h).
REPEAT_N = 100
# Rates: more is better, so their ratio is rmad/C (above 1: rmad does more).
RATES = {"sends/s", "requests/s"}
COLOURS = {"c": "#d62728", "rmad": "#1f77b4", "rmad-capi": "#2ca02c", "floor": "#7f7f7f"}
LINE = re.compile(r"bench-json: (\{.*\})\s*$")
# One RMPP transfer (tests/vm/bench.sh): impl, bytes, loss_pct, rep, status, intact, ms.
RMPP_LINE = re.compile(r"bench-rmpp: (\{.*\})\s*$")
# One goodput run (src/testing/bench/goodput.c): a retry policy against an overloaded responder.
GOODPUT_LINE = re.compile(r"bench-goodput: (\{.*\})\s*$")
GOODPUT_POLICIES = ["c", "rmad", "rmad-backoff"]
GOODPUT_TEXT = {
    "c": "C MAD layer (fixed interval, as 7.3)",
    "rmad": "rmad, the C layer's policy",
    "rmad-backoff": "rmad, backoff and a deadline",
}


def json_lines(text, pattern):
    """The JSON objects of the lines that match pattern (group 1), bad ones left out."""
    for raw in text.splitlines():
        m = pattern.search(raw)
        if not m:
            continue
        try:
            yield json.loads(m.group(1))
        except json.JSONDecodeError:
            continue


def load(console):
    samples = {}
    for d in json_lines(console.read_text(errors="replace"), LINE):
        key = (d["impl"], d["op"], int(d["n"]), d["unit"])
        samples.setdefault(key, []).append(int(d["value"]))
    return samples


def load_rmpp(text):
    """The RMPP transfers, by (impl, bytes, loss_pct)."""
    runs = {}
    for d in json_lines(text, RMPP_LINE):
        runs.setdefault((d["impl"], int(d["bytes"]), int(d["loss_pct"])), []).append(d)
    return runs


def rmpp_rows(runs):
    """One row per (impl, bytes, loss): the times of the transfers that completed whole
    (SUCCESS, every byte right), and how many did."""
    rows = []
    for (impl, size, loss), v in sorted(runs.items()):
        ok = [int(d["ms"]) * 1_000_000 for d in v
              if int(d["status"]) == 0 and int(d["intact"]) == 1]
        row = {"impl": impl, "op": "rmpp", "n": size, "loss_pct": loss, "unit": "ns",
               "reps": len(v), "completed": len(ok),
               "statuses": sorted({int(d["status"]) for d in v}),
               "retries_max": max(int(d["retries"]) for d in v),
               "median": None, "min": None, "max": None}
        if ok:
            row.update(median=statistics.median(ok), min=min(ok), max=max(ok))
        rows.append(row)
    return rows


def goodput_rows(text):
    """One row per retry policy: the medians over its runs of answers per second,
    requests that reached the responder per answer, and the share of GETs that ended in a
    timeout (per mille)."""
    runs = {}
    for d in json_lines(text, GOODPUT_LINE):
        runs.setdefault(d["policy"], []).append(d)
    rows = []
    for policy in sorted(runs, key=lambda p: GOODPUT_POLICIES.index(p)
                         if p in GOODPUT_POLICIES else 99):
        v = runs[policy]
        per_s = [int(d["answered"]) / int(d["secs"]) for d in v]
        tx = [int(d["arrived"]) / max(int(d["answered"]), 1) for d in v]
        share = [1000 * int(d["timed_out"]) / max(int(d["answered"]) + int(d["timed_out"]), 1)
                 for d in v]
        first = v[0]
        rows.append({"impl": policy, "op": "goodput", "reps": len(v),
                     "answered_per_s": statistics.median(per_s),
                     "answered_per_s_min": min(per_s), "answered_per_s_max": max(per_s),
                     "tx_per_answer": statistics.median(tx),
                     "timeout_permille": statistics.median(share),
                     "served_per_s": statistics.median(int(d["served"]) / int(d["secs"])
                                                       for d in v),
                     **{k: int(first[k]) for k in ("rate", "queue", "outstanding", "timeout_ms",
                                                   "retries", "deadline_ms", "secs",
                                                   "warmup_ms")}})
    return rows


def goodput_markdown(rows):
    """The goodput table."""
    if not rows:
        return []
    f = rows[0]
    out = ["", f"Goodput: {f['outstanding']} GETs kept outstanding by 4 requesters against one "
           f"responder that answers {f['rate']} per second and drops what finds its queue of "
           f"{f['queue']} full (rxe0; timeout {f['timeout_ms']} ms, {f['retries']} retries; "
           f"counted {f['secs']} s after a {f['warmup_ms'] / 1000:g} s warm-up).", "",
           "| retry policy | answered/s (min–max) | of the responder's rate | "
           "transmissions per answer | ended in a timeout | runs |",
           "| --- | ---: | ---: | ---: | ---: | ---: |"]
    for r in rows:
        deadline = f", deadline {r['deadline_ms']} ms" if r["deadline_ms"] else ""
        out.append(f"| {GOODPUT_TEXT.get(r['impl'], r['impl'])}{deadline} | "
                   f"{r['answered_per_s']:.0f} ({r['answered_per_s_min']:.0f}–"
                   f"{r['answered_per_s_max']:.0f}) | "
                   f"{100 * r['answered_per_s'] / r['rate']:.0f} % | {r['tx_per_answer']:.1f} | "
                   f"{r['timeout_permille'] / 10:.1f} % | {r['reps']} |")
    return out


def rmpp_markdown(rows):
    """The RMPP table: time from post to send handler of one GET and its whole answer."""
    if not rows:
        return []
    idx = {(r["impl"], r["n"], r["loss_pct"]): r for r in rows}
    out = ["", "RMPP: one GET answered with a segmented response, both ends the same layer "
           "(two soft-RoCE devices on a veth pair, one end in its own network namespace; "
           "netem drops on both ends).", "",
           "| answer | loss each way | C MAD layer | rmad | C/rmad | completed whole: C / rmad |",
           "| ---: | ---: | ---: | ---: | ---: | ---: |"]

    def rcell(r):
        return "–" if r is None or r["median"] is None else cell(r)

    def done(r):
        if r is None:
            return "–"
        bad = [st for st in r["statuses"] if st != 0]
        why = f" (status {', '.join(str(b) for b in bad)})" if bad else ""
        return f"{r['completed']}/{r['reps']}{why}"
    for size, loss in sorted({(r["n"], r["loss_pct"]) for r in rows}):
        c, ru = idx.get(("c", size, loss)), idx.get(("rmad", size, loss))
        rat = ratio(c, ru) if c and ru and c["median"] and ru["median"] else "–"
        label = f"{size // 1024:,} KiB" if size < 1 << 20 else f"{size // (1 << 20):,} MiB"
        out.append(f"| {label} | {loss} % | {rcell(c)} | {rcell(ru)} | {rat} | "
                   f"{done(c)} / {done(ru)} |")
    out.append("")
    out.append("Each time: median (min–max) of the transfers that completed whole "
               "(SUCCESS, every byte right); status: the wc status of the others (20: "
               "RESP_TIMEOUT_ERR).")
    return out


def aggregate(samples):
    rows = []
    for (impl, op, n, unit), v in samples.items():
        rows.append({
            "impl": impl,
            "op": op,
            "n": n,
            "median": statistics.median(v),
            "min": min(v),
            "max": max(v),
            "unit": unit,
            "reps": len(v),
        })
    order = {o: i for i, o in enumerate(OPS)}
    rows.sort(key=lambda r: (order.get(r["op"], 99), r["n"], IMPLS.index(r["impl"])
                             if r["impl"] in IMPLS else 99))
    return rows


def scale(v, unit):
    """The divisor and suffix that suit value v."""
    if unit == "bytes":
        return 1, " B"
    if unit == "holds":
        return 1, ""
    a = abs(v)
    if unit in RATES:
        suffix = " " + unit
        return (1e6, " M" + unit) if a >= 1e6 else (1e3, " k" + unit) if a >= 1e4 else (1, suffix)
    if a >= 1e9:
        return 1e9, " s"
    if a >= 1e6:
        return 1e6, " ms"
    if a >= 1e4:
        return 1e3, " µs"
    return 1, " ns"


def num(v, div):
    x = v / div
    if div == 1:
        return f"{x:,.0f}"
    return f"{x:,.2f}" if abs(x) < 100 else f"{x:,.1f}"


def cell(r):
    """median (min–max), all in the median's unit."""
    if r is None:
        return "–"
    div, suffix = scale(r["median"], r["unit"])
    return f"{num(r['median'], div)}{suffix} ({num(r['min'], div)}–{num(r['max'], div)})"


def ratio(a, b):
    """C/rmad for costs, rmad/C for rates: above 1, rmad does better."""
    if a is None or b is None or b["median"] <= 0 or a["median"] <= 0:
        return "–"
    if a["unit"] in RATES:
        a, b = b, a
    return f"{a['median'] / b['median']:.2f}"


# What each kernel is, for the first line of results.md.
KERNELS = {
    "bench": "the bench kernel (the test kernel's configuration without its debugging "
             "options, plus the irqsoff tracer: tests/vm/kernel-bench.config)",
    "test": "the sanitizer kernel of `make test` (KASAN, kmemleak, lockdep, DEBUG_LIST, "
            "slub_debug=U, failslab): its figures measure the instrumentation as much as "
            "the code",
}


def markdown(rows, notes, rmpp=(), kernel="bench", goodput=()):
    idx = {(r["impl"], r["op"], r["n"]): r for r in rows}
    out = [
        f"Kernel: **{kernel}**, {KERNELS.get(kernel, 'unknown')}.",
        "",
        "| op | N | C MAD layer | rmad (Rust API) | rmad (C API) | floor | C/rmad | "
        "C/rmad C API | reps |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    keys = sorted({(r["op"], r["n"]) for r in rows},
                  key=lambda k: (OPS.index(k[0]) if k[0] in OPS else 99, k[1]))
    for op, n in keys:
        c, ru, ca, fl = (idx.get((i, op, n)) for i in IMPLS)
        k = sorted({r["reps"] for r in (c, ru, ca, fl) if r})
        out.append(f"| {OP_TEXT.get(op, op)} | {n:,} | {cell(c)} | {cell(ru)} | {cell(ca)} | "
                   f"{cell(fl)} | {ratio(c, ru)} | {ratio(c, ca)} | "
                   f"{'/'.join(str(x) for x in k)} |")
    out.append("")
    out.append("Each cell: median (min–max) of its repetitions (reps), in the median's unit. "
               "C/rmad above 1: rmad costs less (for the rates, sends/s and requests/s, the "
               "column is rmad/C: above 1, rmad does more).")
    if any(r["op"] == "transaction" for r in rows):
        out.append("transaction: a GET created, posted, answered by an ib_core agent on the same "
                   "port, its send handler run and the buffer freed there, 16 in flight at once, "
                   "N sends outstanding meanwhile; ns per transaction over the batch.")
    if any(r["n"] <= REPEAT_N for r in rows):
        out.append(f"At N ≤ {REPEAT_N} each figure repeats its part of the round until it has "
                   "timed at least BENCH_MIN_OPS operations (10 000 by default) and reports "
                   "their mean (irqoff_*: one pass).")
    if any(r["op"].startswith("sends_") for r in rows):
        out.append("sends_*: N sends posted by one thread, or by two threads bound to CPUs 0 "
                   "and 1 (half each) to two agents on one port or to one agent, per second "
                   "from the threads' release until the last returned.")
    if any(r["op"] == "served" for r in rows):
        out.append("served: GETs from the C MAD layer on one node (a window of them "
                   "outstanding) answered per second by an ib_core agent (C) or by an rmad "
                   "agent behind ib_core's forwarding agent (rmad) on the other node; N is "
                   "the number of GETs.")
    if any(r["op"].startswith("irqoff_") for r in rows):
        out.append("irqoff_*: the irqsoff tracer's tracing_max_latency (µs resolution), reset "
                   "before each part of a round: the longest stretch with interrupts off on "
                   "any CPU, whatever code held them off, the same measure for every layer, "
                   "taken in a load of its own with the tracer on (it charges every such "
                   "stretch); every time, rate and memory figure comes from a load with it off. "
                   "irqoff_max is the largest of a round's parts; irqoff_removal, the "
                   "maximum while rxe0 was removed with N sends held (its own runs, "
                   "not in irqoff_max).")
    if any(r["op"].startswith("irqoff_hold") for r in rows):
        out.append("irqoff_hold*: in the same load, every hold of an rmad agent's lock (interrupts "
                   "off) during each implementation's rounds, timed by the test flavour: how "
                   "many, the bucket bound (1 µs, then powers of two) under which 50 %, 99 % "
                   "and 99.9 % of them ended, the longest, and how many lasted over 100 µs. "
                   "Only rmad's own holds, so only rmad's columns; a hold that the host "
                   "interrupted counts the host's time too.")
    out.extend(rmpp_markdown(list(rmpp)))
    out.extend(goodput_markdown(list(goodput)))
    out.extend(notes)
    return "\n".join(out) + "\n"


def svg(rows):
    """Small multiples, one panel per operation: cost per operation against N, log-log."""
    panels = [("post", "post"), ("modify", "modify"), ("cancel", "cancel"),
              ("create_free", "create + free"), ("transaction", "transaction"),
              ("match", "match (per response)"), ("rtt", "round trip"),
              ("settle", "settle / N"), ("timeouts", "timeouts / N"),
              ("unregister", "unregister / N"), ("irqoff_max", "longest interrupts-off")]
    per_send = {"settle", "timeouts", "unregister"}
    w, h, cols = 300, 230, 4
    ml, mr, mt, mb = 58, 10, 28, 34
    nrows = math.ceil((len(panels) + 1) / cols)
    width, height = w * cols, h * nrows
    s = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
         f'font-family="sans-serif" font-size="11">',
         f'<rect width="{width}" height="{height}" fill="white"/>']
    for p, (op, title) in enumerate(panels):
        ox, oy = (p % cols) * w, (p // cols) * h
        pts = {}
        for r in rows:
            if r["op"] != op or r["unit"] != "ns":
                continue
            d = r["n"] if op in per_send else 1
            pts.setdefault(r["impl"], []).append(
                (r["n"], r["median"] / d, r["min"] / d, r["max"] / d))
        vals = [v for l in pts.values() for q in l for v in q[1:] if v > 0]
        ns = [q[0] for l in pts.values() for q in l]
        s.append(f'<text x="{ox + w / 2}" y="{oy + 16}" text-anchor="middle" '
                 f'font-weight="bold">{title}</text>')
        if not vals or not ns:
            continue
        x0, x1 = math.floor(math.log10(min(ns))), math.ceil(math.log10(max(ns)))
        y0, y1 = math.floor(math.log10(min(vals))), math.ceil(math.log10(max(vals)))
        x1 = max(x1, x0 + 1)
        y1 = max(y1, y0 + 1)
        pw, ph = w - ml - mr, h - mt - mb

        def X(n):
            return ox + ml + (math.log10(n) - x0) / (x1 - x0) * pw

        def Y(v):
            v = max(v, 10 ** y0)
            return oy + mt + ph - (math.log10(v) - y0) / (y1 - y0) * ph
        s.append(f'<rect x="{ox + ml}" y="{oy + mt}" width="{pw}" height="{ph}" '
                 f'fill="none" stroke="#888"/>')
        for e in range(x0, x1 + 1):
            x = X(10 ** e)
            s.append(f'<line x1="{x:.1f}" y1="{oy + mt}" x2="{x:.1f}" y2="{oy + mt + ph}" '
                     f'stroke="#ddd"/>')
            s.append(f'<text x="{x:.1f}" y="{oy + mt + ph + 14}" text-anchor="middle">'
                     f'10<tspan dy="-4" font-size="8">{e}</tspan></text>')
        for e in range(y0, y1 + 1):
            y = Y(10 ** e)
            s.append(f'<line x1="{ox + ml}" y1="{y:.1f}" x2="{ox + ml + pw}" y2="{y:.1f}" '
                     f'stroke="#ddd"/>')
            s.append(f'<text x="{ox + ml - 4}" y="{y + 4:.1f}" text-anchor="end">'
                     f'10<tspan dy="-4" font-size="8">{e}</tspan></text>')
        s.append(f'<text x="{ox + ml + pw / 2}" y="{oy + h - 4}" text-anchor="middle">'
                 f'N (outstanding sends)</text>')
        s.append(f'<text x="{ox + 12}" y="{oy + mt + ph / 2}" text-anchor="middle" '
                 f'transform="rotate(-90 {ox + 12} {oy + mt + ph / 2})">ns</text>')
        for impl in IMPLS:
            q = sorted(pts.get(impl, []))
            if not q:
                continue
            col = COLOURS[impl]
            dash = ' stroke-dasharray="4 3"' if impl == "floor" else ""
            path = " ".join(f"{X(n):.1f},{Y(m):.1f}" for n, m, _, _ in q)
            s.append(f'<polyline points="{path}" fill="none" stroke="{col}" '
                     f'stroke-width="1.6"{dash}/>')
            for n, m, lo, hi in q:
                s.append(f'<line x1="{X(n):.1f}" y1="{Y(lo):.1f}" x2="{X(n):.1f}" '
                         f'y2="{Y(hi):.1f}" stroke="{col}"/>')
                s.append(f'<circle cx="{X(n):.1f}" cy="{Y(m):.1f}" r="2.5" fill="{col}"/>')
    # The legend, in the last cell.
    p = len(panels)
    ox, oy = (p % cols) * w, (p // cols) * h
    names = {"c": "C MAD layer", "rmad": "rmad, Rust API", "rmad-capi": "rmad, C API",
             "floor": "floor (lock, list move, unlock, queue_work)"}
    s.append(f'<text x="{ox + 20}" y="{oy + 40}" font-weight="bold">cost per operation '
             f'against N</text>')
    s.append(f'<text x="{ox + 20}" y="{oy + 56}">log–log; median, bar: min–max</text>')
    for i, impl in enumerate(IMPLS):
        y = oy + 80 + 20 * i
        dash = ' stroke-dasharray="4 3"' if impl == "floor" else ""
        s.append(f'<line x1="{ox + 20}" y1="{y}" x2="{ox + 50}" y2="{y}" '
                 f'stroke="{COLOURS[impl]}" stroke-width="2"{dash}/>')
        s.append(f'<text x="{ox + 56}" y="{y + 4}">{names[impl]}</text>')
    s.append("</svg>")
    return "\n".join(s) + "\n"


def main():
    if len(sys.argv) not in (3, 4):
        sys.exit("usage: bench-report.py CONSOLE.log OUTDIR [KERNEL]")
    console, outdir = Path(sys.argv[1]), Path(sys.argv[2])
    kernel = sys.argv[3] if len(sys.argv) == 4 else "bench"
    samples = load(console) if console.exists() else {}
    rows = aggregate(samples)
    outdir.mkdir(parents=True, exist_ok=True)
    text = console.read_text(errors="replace") if console.exists() else ""
    notes = []
    m = re.search(r"bench: console lines 'unsupported base version': (\d+)", text)
    if m:
        notes.append(f"Console: {m.group(1)} \"unsupported base version\" errors.")
    failed = re.findall(r"bench: .*(?:failed|timed out, |unregistration flushed|lost|arrived|round trips completed).*",
                        text)
    for f in failed:
        notes.append(f"Console: {f.strip()}")
    rmpp = rmpp_rows(load_rmpp(text))
    goodput = goodput_rows(text)
    (outdir / "results.json").write_text(json.dumps(
        [{"kernel": kernel, **{k: r[k] for k in ("impl", "op", "n", "median", "min", "max",
                                                 "unit", "reps")}} for r in rows]
        + [{"kernel": kernel, **{k: r[k] for k in ("impl", "op", "n", "loss_pct", "median",
                                                 "min", "max", "unit", "reps", "completed",
                                                 "statuses", "retries_max")}}
           for r in rmpp]
        + [{"kernel": kernel, **r} for r in goodput],
        indent=1) + "\n")
    (outdir / "results.md").write_text(markdown(rows, notes, rmpp, kernel, goodput))
    (outdir / "cost-vs-n.svg").write_text(svg(rows))
    print((outdir / "results.md").read_text(), end="")
    if not rows and not goodput:
        sys.exit("bench: no figures in " + str(console))


if __name__ == "__main__":
    main()

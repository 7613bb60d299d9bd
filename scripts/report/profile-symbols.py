#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Name the module addresses of `make bench`'s profile (BENCH_PROFILE=1).

The guest's perf names the functions of the kernel proper but prints a bare address for every
function of an out-of-tree module (rmad) and of some in-tree ones. tests/vm/bench.sh prints,
next to each report, where each module's .text was loaded ("module NAME 0xADDR"); this script
finds each bare address's module, reads the function symbols of the module's .ko with
readelf, and writes the report back with "module:function+0xoff" in place of the address.
Names are demangled (Rust's too) with c++filt.

Usage: profile-symbols.py PROFILE.txt KO_DIR...   (the .ko files are looked for by name
under the KO_DIRs: the module build, then the kernel build tree)
"""

import os
import re
import subprocess
import sys


def ko_files(dirs):
    """Module name -> path of its .ko, the first found in `dirs` order."""
    found = {}
    for d in dirs:
        for root, _, files in os.walk(d):
            for f in files:
                if f.endswith(".ko"):
                    found.setdefault(f[:-3].replace("-", "_"), os.path.join(root, f))
    return found


def text_symbols(ko):
    """(size of .text, sorted [(offset, name)]) of the functions in the .ko's .text."""
    out = subprocess.run(["readelf", "-SWs", ko], capture_output=True, text=True,
                         check=True).stdout
    text_ndx, size = None, 0
    for m in re.finditer(r"\[\s*(\d+)\]\s+\.text\s+PROGBITS\s+\S+\s+\S+\s+(\S+)", out):
        text_ndx, size = m.group(1), int(m.group(2), 16)
    syms = []
    for line in out.splitlines():
        f = line.split()
        # Num: Value Size Type Bind Vis Ndx Name
        if len(f) >= 8 and f[3] == "FUNC" and f[6] == text_ndx:
            syms.append((int(f[1], 16), f[7]))
    syms.sort()
    return size, syms


def demangle(names):
    """The demangled form of each name (binutils' c++filt knows Rust's v0 scheme), without the
    crates' disambiguators ("rmad_main[a3e2...]" is "rmad_main")."""
    out = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True,
                         check=True).stdout.splitlines()
    return {n: re.sub(r"\[[0-9a-f]{16}\]", "", d) for n, d in zip(names, out)}


def main():
    profile, dirs = sys.argv[1], sys.argv[2:]
    lines = open(profile).read().splitlines()
    bases = {}
    for line in lines:
        m = re.match(r"module (\S+) (0x[0-9a-f]+)$", line)
        if m:
            bases[m.group(1)] = int(m.group(2), 16)
    kos = ko_files(dirs)
    spans = []
    for name, base in bases.items():
        if name in kos:
            size, syms = text_symbols(kos[name])
            spans.append((base, base + size, name, syms))

    names = demangle(sorted({sym for _, _, _, syms in spans for _, sym in syms}))

    def symbolize(m):
        addr = int(m.group(0), 16)
        for lo, hi, name, syms in spans:
            if lo <= addr < hi:
                off = addr - lo
                best = None
                for value, sym in syms:
                    if value > off:
                        break
                    best = (value, sym)
                if best is None:
                    return f"{name}:+{off:#x}"
                return f"{name}:{names.get(best[1], best[1])}+{off - best[0]:#x}"
        return m.group(0)

    for line in lines:
        if line.startswith("module "):
            continue
        print(re.sub(r"0xffffffff[0-9a-f]{8}", symbolize, line))


if __name__ == "__main__":
    main()

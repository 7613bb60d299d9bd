#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Checks that the tree keeps the shape issue 15 gave it, for `make lint`:

  sizes  every code file (*.rs, *.c, *.h, *.sh, *.py, Makefile, Kbuild, and
         any file that starts with `#!`) has fewer than 1 000 lines, and
         README.md has at most 13 000 bytes (the details live in
         Documentation/, which is not bounded);
  gates  the test flavour hangs off one gate of the crate root: in
         src/rmad_main.rs, `rmad_test` appears only on `mod testing` and
         on the `_testing` field (its declaration, the value it is built
         from, and its initializer); and
         every product file (src/ outside src/testing/) with a `rmad_test`
         hook is listed in HOOKS below with the reason the hook must live
         there and not in src/testing/;
  shape  in product Rust files (src/ outside src/testing/), every function
         body is at most 80 lines (the state table, mad/state.rs's `step`,
         is the one exception: one arm per transition reads best in one
         place), and no file imports its parent's names with a glob
         (`use super::*`, or `*` inside `use super::{...}`);
  queues no code of ours (src/, samples/, tests/clients/, include/) queues
         work on a system workqueue that 7.3 deprecated (`system_wq`,
         `system_unbound_wq`, or the kernel crate's `system()` and
         `system_unbound()`, which return them): the kernel warns at the first
         item queued there; src/sys/workqueue.rs has `system_dfl()` and
         `system_percpu()` (issue 41).

Usage: check-tree.py sizes|gates|shape|queues ROOT. Prints what is wrong; exits 1 if anything is.
"""
import os
import re
import subprocess
import sys

MAX_LINES = 1000
README_MAX_BYTES = 13000
CODE_SUFFIXES = (".rs", ".c", ".h", ".sh", ".py")
CODE_NAMES = ("Makefile", "Kbuild")

# TEMPORARY: files that other branches of issue 32 are splitting; the lead
# removes each entry when the split is merged.
SIZE_ALLOWED = {
}

# The only items of src/rmad_main.rs a `rmad_test` gate may sit on: the test
# flavour's module and the one field that holds what it starts.
ROOT = "src/rmad_main.rs"
ROOT_GATED = (
    re.compile(r"^mod testing;$"),
    re.compile(r"^_testing: testing::Flavour,$"),
    re.compile(r"^let flavour = testing::Flavour::start\(&debugfs\)\?;$"),
    re.compile(r"^_testing: flavour,$"),
)

# Product files with test-flavour hooks, and why each hook cannot move to
# src/testing/: a hook reads or writes what is private to its file, sits in
# the middle of a product function, or keeps an item that only the suites
# call from being dead code in the production build.
HOOKS = {
    "src/capi.rs": "the suites call the C API's receive-side entry points directly, "
    "which the layer re-exports only for them",
    "src/capi/register.rs": "the suites delay rmad_register_agent between the agent's "
    "publication and the call's return, in the middle of that product function",
    "src/capi/compat.rs": "the suites take a packet's record from the verbs transport's to "
    "the ib_mad interface's through the private conversion between them (CompatWc)",
    "src/capi/send.rs": "the suites read the gfp mask rmad_create_send_mad allocates with, "
    "and hold a buffer's slot lock, which is private to the handle tables",
    "src/capi/unload.rs": "the suites make an agent look as if its handlers lived in a module "
    "that unloads, through the agent's private record",
    "src/capi/devices.rs": "the device registry is product code that only the test "
    "flavour registers a device in (lb0)",
    "src/capi/handles.rs": "age_slot writes a slot's private generation (rmad_handles "
    "cannot wait for 2^37 frees)",
    "src/debugfs.rs": "the test flavour's files live in rmad/, whose Dir is private to "
    "Debugfs",
    "src/engine/agent.rs": "re-exports of the RMPP bounds that only "
    "the suites read, and the log of the waits the agent began (Stats::waits), which "
    "rmad_retry checks the retry rules' schedules against",
    "src/engine/agent/apply.rs": "a wait is noted in the agent's wait log where it begins, "
    "in the middle of the one function that moves a send between queues",
    "src/engine/agent/create.rs": "the Rust API's common constructors, which only the "
    "suites call",
    "src/engine/agent/spec.rs": "SendSpec::mad, the Rust API's common case, which only the "
    "suites call",
    "src/engine/agent/hold.rs": "every hold of an agent's lock goes through Agent::lock; "
    "the test flavour times the holds and counts the sends per hold there",
    "src/engine/agent/post.rs": "the Rust API's chained post, which only the suites call",
    "src/engine/record/buf.rs": "the Rust API's accessors of a send buffer, which only the "
    "suites call",
    "src/engine/send.rs": "the Rust API's cancel, which only the suites call",
    "src/engine/transport.rs": "fields and methods of the transport interface that only "
    "the loopback fabric reads",
    "src/verbs.rs": "with_vport hands the suites' hooks the shim's port, which is private "
    "to VerbsPort and valid only under its lock",
    "src/sys/memalloc.rs": "the effective gfp mask is read through the C helper of "
    "src/sys/memalloc.c, which the production build links",
    "src/sys/buckets.rs": "the length of an index, which only the suites read",
    "src/sys/fifo.rs": "the length of a list, which only the suites read",
    "src/sys/rbtree.rs": "accessors of the tree that only the suites read",
    "src/sys/workqueue.rs": "system_dfl(), the kernel's default system queue, wrapped once "
    "with the others, on which only the suites queue work (their threads), and "
    "set_max_active, with which the suites hold an engine's agent work (block_queue): "
    "both wrap a binding once, beside the other workqueue calls",
}


def tracked(root, *paths):
    out = subprocess.check_output(["git", "-C", root, "ls-files", "-co", "--exclude-standard", *paths],
                                  text=True)
    return [p for p in out.splitlines() if os.path.isfile(os.path.join(root, p))]


def is_code(root, path):
    name = os.path.basename(path)
    if name.endswith(CODE_SUFFIXES) or name in CODE_NAMES:
        return True
    with open(os.path.join(root, path), "rb") as f:
        return f.read(2) == b"#!"


def check_sizes(root):
    bad = 0
    for f in tracked(root):
        if not is_code(root, f) or f in SIZE_ALLOWED:
            continue
        with open(os.path.join(root, f), "rb") as fh:
            lines = fh.read().count(b"\n")
        if lines >= MAX_LINES:
            print("%s: %d lines (code files stay under %d: split it by purpose)" % (f, lines, MAX_LINES))
            bad += 1
    size = os.path.getsize(os.path.join(root, "README.md"))
    if size > README_MAX_BYTES:
        print("README.md: %d bytes (at most %d: move detail to Documentation/ and link it)"
              % (size, README_MAX_BYTES))
        bad += 1
    return bad


def gate_lines(text):
    """Lines of `text` that name the rmad_test cfg, as (line number, line)."""
    return [(n, l) for n, l in enumerate(text.splitlines(), 1) if re.search(r"\brmad_test\b", l)
            and not l.lstrip().startswith("//")]


def check_gates(root):
    bad = 0
    lines = open(os.path.join(root, ROOT)).read().splitlines()
    for n, line in gate_lines("\n".join(lines)):
        gated = None
        if line.strip() == "#[cfg(rmad_test)]":
            # The item the gate sits on: the next line that is not an attribute.
            gated = next((l.strip() for l in lines[n:] if not l.strip().startswith("#[")), "")
        if gated is None or not any(p.match(gated) for p in ROOT_GATED):
            print("%s:%d: the test flavour hangs off `mod testing` and the `_testing` field "
                  "only; this gate is on %s" % (ROOT, n, repr(gated if gated is not None else line.strip())))
            bad += 1
    hooked = set()
    for f in tracked(root, "src"):
        if not f.endswith(".rs") or f == ROOT or f == "src/testing.rs" or f.startswith("src/testing/"):
            continue
        if gate_lines(open(os.path.join(root, f)).read()):
            hooked.add(f)
    for f in sorted(hooked - HOOKS.keys()):
        print("%s: has rmad_test hooks; say why they cannot live in src/testing/ (HOOKS in %s)"
              % (f, os.path.relpath(__file__, root)))
        bad += 1
    for f in sorted(HOOKS.keys() - hooked):
        print("%s: listed in HOOKS of %s but has no rmad_test hook any more"
              % (f, os.path.relpath(__file__, root)))
        bad += 1
    return bad


MAX_FN_LINES = 80
# (file, function) pairs allowed a longer body, and why.
LONG_FNS = {
    ("src/mad/state.rs", "step"): "the state table: one arm per transition, in one place",
}
FN_START = re.compile(r"^(\s*)(?:pub(?:\([^)]*\))?\s+)?(?:const\s+)?(?:unsafe\s+)?"
                      r"(?:extern \"C\"\s+)?fn\s+(\w+)")


def long_functions(text):
    """(name, first line, lines) of each function body in `text` longer than MAX_FN_LINES."""
    lines = text.splitlines()
    out = []
    i = 0
    while i < len(lines):
        m = FN_START.match(lines[i])
        if not m:
            i += 1
            continue
        indent = m.group(1)
        # The signature ends at the first line ending with `{` (a body) or `;` (none).
        j = i
        while j < len(lines) and not lines[j].rstrip().endswith(("{", ";")):
            j += 1
        if j >= len(lines) or lines[j].rstrip().endswith(";"):
            i = j + 1
            continue
        k = j + 1
        while k < len(lines) and lines[k] != indent + "}":
            k += 1
        if k - i + 1 > MAX_FN_LINES:
            out.append((m.group(2), i + 1, k - i + 1))
        i = k + 1
    return out


def check_shape(root):
    bad = 0
    for f in tracked(root, "src"):
        if not f.endswith(".rs") or f == "src/testing.rs" or f.startswith("src/testing/"):
            continue
        text = open(os.path.join(root, f)).read()
        for name, line, n in long_functions(text):
            if (f, name) in LONG_FNS:
                continue
            print("%s:%d: fn %s is %d lines (at most %d: split it)" % (f, line, name, n, MAX_FN_LINES))
            bad += 1
        for m in re.finditer(r"(?m)^use super::(\*|\{[^;]*\*[^;]*\});", text):
            print("%s: imports its parent's names with a glob (%s): name what it uses"
                  % (f, m.group(0).split("\n")[0]))
            bad += 1
    return bad


DEPRECATED_QUEUE = re.compile(
    r"\bsystem_wq\b|\bsystem_unbound_wq\b|workqueue::system(_unbound)?\(\)|"
    r"\bsystem_unbound\(\)|workqueue::\{[^}]*\bsystem(_unbound)?\b[^}]*\}")


def check_queues(root):
    bad = 0
    for f in tracked(root, "src", "samples", "tests/clients", "include"):
        if not f.endswith((".rs", ".c", ".h")):
            continue
        # Comments may name them (to say why not); code may not.
        text = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"),
                      open(os.path.join(root, f)).read(), flags=re.S)
        text = re.sub(r"//[^\n]*", "", text)
        for m in DEPRECATED_QUEUE.finditer(text):
            line = text.count("\n", 0, m.start()) + 1
            print("%s:%d: %s is a deprecated system workqueue: use system_dfl or system_percpu"
                  % (f, line, m.group(0).split("\n")[0]))
            bad += 1
    return bad


def main():
    checks = {"sizes": check_sizes, "gates": check_gates, "shape": check_shape,
              "queues": check_queues}
    if len(sys.argv) != 3 or sys.argv[1] not in checks:
        sys.exit(__doc__)
    sys.exit(1 if checks[sys.argv[1]](sys.argv[2]) else 0)


if __name__ == "__main__":
    main()

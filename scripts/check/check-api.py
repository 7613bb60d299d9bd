#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Checks on the C API's three views (include/rmad.h, src/capi/types.rs,
include/rmad_binding.rs) that the compilers cannot make:

  layouts  every structure of rmad.h has the same fields, in the same order,
           of the same types, in src/capi/types.rs and in the Rust binding (each
           view also asserts sizes and offsets at compile time, but only against
           numbers written next to it), every RMAD_MGMT_X constant of rmad.h is
           the binding's mgmt::X, with the same value, and the binding's
           API_VERSION_MAJOR and _MINOR are rmad.h's RMAD_API_VERSION_MAJOR and
           _MINOR (the binding asserts that too when a client builds); the
           private structures C glue and Rust share agree (PRIVATE), and
           include/rmad_ib_mad.h maps each ib_core MAD call to an exported
           rmad_ib_ function of ib_core's type;
  docs     every function rmad exports, and every structure, enum and callback
           type of rmad.h, has a kernel-doc comment in rmad.h, and
           Documentation/changes.md has a section for rmad.h's version.

Usage: check-api.py layouts|docs ROOT. Prints what is wrong; exits 1 if anything is.
"""
import re
import sys

# The C structures and their Rust names in src/capi.rs and in the binding.
STRUCTS = {
    "rmad_ah": ("RmadAh", "Ah"),
    "rmad_send_wc": ("RmadSendWc", "SendWc"),
    "rmad_recv_wc": ("RmadRecvWc", "RecvWc"),
    "rmad_reg_req": ("RmadRegReq", "RegReq"),
}

# The private structures that C glue and Rust share: (C header, C name, Rust file, Rust name).
PRIVATE = [
    ("src/compat/compat.h", "rmad_compat_wc", "src/capi/compat.rs", "CompatWc"),
]

# What include/rmad_ib_mad.h puts in place of ib_core's MAD calls.
IB_MAD_CALLS = [
    "ib_register_mad_agent", "ib_unregister_mad_agent", "ib_create_send_mad",
    "ib_free_send_mad", "ib_post_send_mad", "ib_modify_mad", "ib_cancel_mad",
    "ib_free_recv_mad", "ib_get_rmpp_segment",
]


def ib_mad_header(root):
    """include/rmad_ib_mad.h maps each of IB_MAD_CALLS with a function-like macro to its
    rmad_ib_ function, which src/compat/ib_mad.c exports and asserts to have ib_core's type
    (ib_cancel_mad, inline in ib_core, goes to rmad_ib_modify_mad); nothing else is mapped."""
    header = open(root + "/include/rmad_ib_mad.h").read()
    glue = open(root + "/src/compat/ib_mad.c").read()
    bad = 0
    mapped = re.findall(r"^#define (ib_\w+)\(", header, re.M)
    if sorted(mapped) != sorted(IB_MAD_CALLS):
        print("include/rmad_ib_mad.h maps %s, not %s" % (sorted(mapped), sorted(IB_MAD_CALLS)))
        bad += 1
    for call in IB_MAD_CALLS:
        target = "rmad_ib_modify_mad" if call == "ib_cancel_mad" else "rmad_" + call
        m = re.search(r"^#define %s\(([^)]*)\)\s*(?:\\\n)?\s*\(?(?:\(void\))?(\w+)\("
                      % call, header, re.M)
        if not m or m.group(2) != target:
            print("include/rmad_ib_mad.h: %s does not call %s" % (call, target))
            bad += 1
            continue
        if call == "ib_cancel_mad":
            continue
        if "EXPORT_SYMBOL_GPL(%s);" % target not in glue:
            print("src/compat/ib_mad.c does not export %s" % target)
            bad += 1
        if "static_assert(__same_type(&%s, &%s));" % (target, call) not in glue:
            print("src/compat/ib_mad.c does not assert that %s has %s's type" % (target, call))
            bad += 1
    return bad


# C field types and the Rust types that have their layout.
C_TO_RUST = {
    "u8": "u8", "u16": "u16", "u32": "u32", "u64": "u64", "int": "c_int",
}


def c_fields(header, name):
    """(field, normalized type) of struct NAME in HEADER."""
    m = re.search(r"^struct %s \{(.*?)^\};" % name, header, re.S | re.M)
    if not m:
        return None
    out = []
    for line in m.group(1).splitlines():
        line = line.strip().rstrip(";")
        if not line:
            continue
        f = re.fullmatch(r"(const )?(struct )?(\w+) (\*?)(\w+)(\[(\d+)\])?", line)
        if not f:
            out.append(("?", line))
            continue
        base, ptr, field, count = f.group(3), f.group(4), f.group(5), f.group(7)
        if ptr:
            ty = "ptr"
        else:
            ty = C_TO_RUST.get(base, base)
        if count:
            ty = "[%s; %s]" % (ty, count)
        out.append((field, ty))
    return out


def rust_fields(source, name):
    """(field, normalized type) of the #[repr(C)] struct NAME in SOURCE."""
    m = re.search(r"#\[repr\(C\)\]\n(?:#\[derive[^\n]*\n)?pub\(crate\) struct %s \{(.*?)^\}"
                  % name + "|" + r"#\[repr\(C\)\]\n(?:#\[derive[^\n]*\n)?struct %s \{(.*?)^\}" % name,
                  source, re.S | re.M)
    if not m:
        return None
    body = m.group(1) or m.group(2)
    out = []
    for line in body.splitlines():
        line = line.strip()
        f = re.fullmatch(r"(?:pub\(crate\) )?(\w+): (.+),", line)
        if not f:
            continue
        field, ty = f.group(1), f.group(2)
        if ty.startswith("*"):
            ty = "ptr"
        ty = re.sub(r"\bGid\b", "[u8; 16]", ty)
        out.append((field, ty))
    return out


def layouts(root):
    header = open(root + "/include/rmad.h").read()
    capi = open(root + "/src/capi/types.rs").read()
    # The binding's C structures are in the file it includes.
    binding = (open(root + "/include/rmad_binding.rs").read()
               + open(root + "/include/rmad_binding_ffi.rs").read())
    bad = 0
    for c, (r_capi, r_binding) in STRUCTS.items():
        want = c_fields(header, c)
        if want is None:
            print("rmad.h has no struct %s" % c)
            bad += 1
            continue
        for where, src, rname in (("src/capi/types.rs", capi, r_capi),
                                  ("include/rmad_binding.rs", binding, r_binding)):
            got = rust_fields(src, rname)
            if got != want:
                print("struct %s: %s's %s differs:\n  C:    %s\n  Rust: %s" % (c, where, rname, want, got))
                bad += 1
    # The private structures C glue and Rust share: each C header's against its Rust mirror.
    for c_file, c, r_file, rname in PRIVATE:
        want = c_fields(open(root + "/" + c_file).read(), c)
        got = rust_fields(open(root + "/" + r_file).read(), rname)
        if want is None or got != want:
            print("struct %s of %s: %s's %s differs:\n  C:    %s\n  Rust: %s"
                  % (c, c_file, r_file, rname, want, got))
            bad += 1
    bad += ib_mad_header(root)
    consts = re.findall(r"^#define RMAD_MGMT_(\w+)\s+(0x[0-9a-fA-F]+|\d+)", header, re.M)
    mirrored = dict(re.findall(r"pub\(crate\) const (\w+): u\d+ = (0x[0-9a-fA-F]+|\d+);", binding))
    for name, value in consts:
        if name not in mirrored or int(mirrored[name], 0) != int(value, 0):
            print("RMAD_MGMT_%s = %s: the binding's mgmt::%s is %s" % (name, value, name, mirrored.get(name)))
            bad += 1
    if not consts:
        print("rmad.h has no RMAD_MGMT_ constant")
        bad += 1
    for part in ("MAJOR", "MINOR"):
        c, r = header_version(header, part), binding_version(binding, part)
        if c is None or c != r:
            print("RMAD_API_VERSION_%s = %s: the binding's API_VERSION_%s is %s" % (part, c, part, r))
            bad += 1
    return bad


def header_version(header, part):
    """RMAD_API_VERSION_PART of rmad.h, or None."""
    m = re.search(r"^#define RMAD_API_VERSION_%s (\d+)$" % part, header, re.M)
    return int(m.group(1)) if m else None


def binding_version(binding, part):
    """API_VERSION_PART of the binding, or None."""
    m = re.search(r"^pub\(crate\) const API_VERSION_%s: u32 = (\d+);$" % part, binding, re.M)
    return int(m.group(1)) if m else None


def docs(root):
    header = open(root + "/include/rmad.h").read()
    exports = re.findall(r"EXPORT_SYMBOL_GPL\((\w+)\)", open(root + "/src/capi/exports.c").read())
    bad = 0
    wanted = ["%s - " % f for f in exports]
    wanted += ["struct %s - " % s for s in re.findall(r"^struct (\w+) \{", header, re.M)]
    wanted += ["enum %s - " % s for s in re.findall(r"^enum (\w+) \{", header, re.M)]
    wanted += ["typedef %s - " % s for s in re.findall(r"^typedef \w+ \(\*(\w+)\)", header, re.M)]
    for w in wanted:
        if not re.search(r"/\*\*\n \* %s" % re.escape(w), header):
            print("include/rmad.h: no kernel-doc comment '%s...'" % w)
            bad += 1
    if not exports:
        print("no exported function found")
        bad += 1
    version = "%s.%s" % (header_version(header, "MAJOR"), header_version(header, "MINOR"))
    changes = open(root + "/Documentation/changes.md").read()
    if not re.search(r"^## %s\b" % re.escape(version), changes, re.M):
        print("Documentation/changes.md: no section '## %s' for rmad.h's version" % version)
        bad += 1
    return bad


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in ("layouts", "docs"):
        sys.exit(__doc__)
    bad = {"layouts": layouts, "docs": docs}[sys.argv[1]](sys.argv[2])
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()

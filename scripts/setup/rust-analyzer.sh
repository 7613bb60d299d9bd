#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# `make rust-analyzer`: write rust-project.json (ignored by git) for
# rust-analyzer, indexing rmad's own crate (src/rmad_main.rs and every module
# under it, with the test flavour's cfg so the tests are indexed too) and the
# Rust sample, against the kernel crates of KDIR (default: the cached test
# kernel). The kernel's own `make -C $KDIR M=$PWD rust-analyzer` finds only
# crates that Kbuild names as `obj-m := <crate>.o`, which leaves out rmad,
# whose crate root is one object among several (`rmad-y := src/rmad_main.o ...`).
set -euo pipefail
source "$(dirname "$0")/../lib.sh"

if user_kdir; then
	make -C "$KDIR" "${USER_FLAGS[@]}" M="$RMAD_ROOT" rust-analyzer >&2
else
	mapfile -t vars < <(kernel_make_vars)
	make -C "$("$RMAD_ROOT/scripts/setup/bootstrap.sh")" "${vars[@]}" M="$RMAD_ROOT" rust-analyzer >&2
fi

python3 - "$RMAD_ROOT" <<'PY'
import copy, json, os, sys
root = sys.argv[1]
path = os.path.join(root, "rust-project.json")
project = json.load(open(path))
crates = project["crates"]
sample = next(c for c in crates if c["root_module"].endswith("rmad_sample_rust.rs"))
sample["root_module"] = os.path.join(root, "samples/rust/rmad_sample_rust.rs")
# rmad: the sample's dependencies and configuration, plus the test flavour's cfg.
rmad = copy.deepcopy(sample)
rmad["display_name"] = "rmad"
rmad["root_module"] = os.path.join(root, "src/rmad_main.rs")
rmad["cfg"] = rmad.get("cfg", []) + ["rmad_test"]
rmad.setdefault("env", {})["RUST_MODFILE"] = "rmad"
crates.append(rmad)
json.dump(project, open(path, "w"), indent=1)
print(f"{path}: {len(crates)} crates, rmad's root {rmad['root_module']}")
PY

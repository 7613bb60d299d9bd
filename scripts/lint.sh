#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# `make lint`: zero warnings from
#   - clippy (the kernel's CLIPPY=1 build) on both flavours of rmad.ko and on
#     the Rust sample, against the cached test kernel;
#   - checkpatch.pl --strict on every C file and header, with two exceptions
#     said below;
#   - kernel-doc -Wall on include/rmad.h, and a kernel-doc comment on every
#     export, structure, enum and callback type (scripts/check/check-api.py docs), and
#     the header's, the C API's and the binding's layouts and API version agree (layouts);
#   - rustfmt --check (the kernel's .rustfmt.toml) on every Rust file of ours;
#   - Documentation/architecture.md names every file under src/, and every
#     § citation in the code is a section of Documentation/behaviour.md
#     (scripts/check/check-docs.py);
#   - every code file under 1 000 lines, README.md at most 13 000 bytes, the
#     test flavour behind one gate of src/rmad_main.rs and each product file's
#     test hooks given a reason, product functions of at most 80 lines and no glob import
#     of a parent (scripts/check/check-tree.py);
#   - tests/suites.txt, the suites every run expects, lists each KUnit suite of
#     the code with its number of cases (scripts/check/check-suites.py).
#   - the reader of `make bench BENCH_INSN=1`'s counts pairs windows, divides and
#     demangles as it should, on a made-up run (scripts/report/insn-report.py --self-test).
#   - the engine's files (src/engine.rs, src/engine/) import each other in no circle
#     beyond the one it still lists, which may only shrink (scripts/check/check-imports.py).
# Not part of `make test`: `make test` builds with the same toolchain but does
# not run clippy (about 35 s more).
set -euo pipefail
source "$(dirname "$0")/lib.sh"

kbuild="$("$RMAD_ROOT/scripts/setup/bootstrap.sh")"
mapfile -t vars < <(kernel_make_vars)
out="$RMAD_OUT/lint"
failed=0

# clippy FLAVOUR DIR [MAKE ARGS...]: warnings of the CLIPPY=1 build of DIR.
clippy() {
	local name="$1" dir="$2" log="$out/$1.log" n
	shift 2
	mkdir -p "$out/$name"
	LIBCLANG_PATH="/usr/lib/llvm$LLVM_SUFFIX/lib" make -C "$kbuild" "${vars[@]}" M="$dir" \
		MO="$out/$name" CLIPPY=1 "$@" modules >"$log" 2>&1 || failed=1
	n="$(grep -c '^\(warning\|error\)' "$log" || true)"
	step "clippy ($name): $n warnings or errors ($log)"
	[ "$n" -eq 0 ] || {
		grep -A6 '^\(warning\|error\)' "$log" | head -n 60
		failed=1
	}
}
clippy production "$RMAD_ROOT"
clippy test "$RMAD_ROOT" RMAD_TEST=1
clippy sample "$RMAD_ROOT/samples/rust" KBUILD_EXTRA_SYMBOLS="$out/production/Module.symvers"

# checkpatch FILE [IGNORES]: checkpatch's findings on FILE.
checkpatch() {
	local found
	found="$("$LINUX_TREE/scripts/checkpatch.pl" --strict --no-tree --terse -f ${2:+--ignore "$2"} "$1" |
		grep -v '^total:' || true)"
	[ -z "$found" ] || {
		echo "$found"
		failed=1
	}
}
mapfile -t c_files < <(cd "$RMAD_ROOT" && git ls-files -co --exclude-standard 'src/*.[ch]' 'samples/c/*.c' 'tests/clients/*.c')
for f in "${c_files[@]/#/$RMAD_ROOT/}" "$RMAD_ROOT"/include/rmad.h; do
	case "${f#"$RMAD_ROOT"/}" in
	# The exported functions are written in Rust (src/capi.rs): checkpatch
	# cannot see them, so no EXPORT_SYMBOL can follow its function.
	src/capi/exports.c) checkpatch "$f" EXPORT_SYMBOL ;;
	# A trace header follows include/trace/events/ (TP_STRUCT__entry( ... ) on
	# lines of their own), which checkpatch's C alignment rules do not know.
	src/sys/rmad_trace.h) checkpatch "$f" PARENTHESIS_ALIGNMENT,OPEN_ENDED_LINE ;;
	# The bench's instruction markers need their id as an immediate: one case per id,
	# written by a macro that is a case label and a statement, which checkpatch takes
	# for a function-like macro.
	src/testing/bench/insn.c) checkpatch "$f" COMPLEX_MACRO,MACRO_ARG_REUSE,MULTISTATEMENT_MACRO_USE_DO_WHILE ;;
	*) checkpatch "$f" ;;
	esac
done
step "checkpatch --strict: ${#c_files[@]} files + include/rmad.h"

docs="$("$LINUX_TREE/scripts/kernel-doc" -Wall -none "$RMAD_ROOT/include/rmad.h" 2>&1)"
[ -z "$docs" ] || {
	echo "$docs"
	failed=1
}
python3 "$RMAD_ROOT/scripts/check/check-api.py" docs "$RMAD_ROOT" || failed=1
python3 "$RMAD_ROOT/scripts/check/check-api.py" layouts "$RMAD_ROOT" || failed=1
step "kernel-doc -Wall: include/rmad.h"

# The architecture page names every file under src/; every § citation points into the
# behaviour reference (scripts/check/check-docs.py).
python3 "$RMAD_ROOT/scripts/check/check-docs.py" map "$RMAD_ROOT" || failed=1
python3 "$RMAD_ROOT/scripts/check/check-docs.py" citations "$RMAD_ROOT" || failed=1
step "docs: Documentation/architecture.md names every file of src/; citations resolve"

# Small files, a short README, one test gate in the crate root (scripts/check/check-tree.py).
python3 "$RMAD_ROOT/scripts/check/check-tree.py" sizes "$RMAD_ROOT" || failed=1
python3 "$RMAD_ROOT/scripts/check/check-tree.py" gates "$RMAD_ROOT" || failed=1
# Functions of at most 80 lines, explicit imports (issue 33).
python3 "$RMAD_ROOT/scripts/check/check-tree.py" shape "$RMAD_ROOT" || failed=1
# No work on the system queues 7.3 deprecated (issue 41).
python3 "$RMAD_ROOT/scripts/check/check-tree.py" queues "$RMAD_ROOT" || failed=1
step "tree: code files under 1 000 lines, README.md under 13 000 bytes, test gates"

# The engine's imports form no new circle (issue 42, item 3); the check checks itself first.
python3 "$RMAD_ROOT/scripts/check/check-imports.py" --self-test || failed=1
python3 "$RMAD_ROOT/scripts/check/check-imports.py" "$RMAD_ROOT" || failed=1
step "imports: the engine's files import each other in no circle"

# One manifest of what each run expects, agreeing with the KUnit suites in the code
# (scripts/check/check-suites.py).
python3 "$RMAD_ROOT/scripts/check/check-suites.py" "$RMAD_ROOT" || failed=1
step "suites: tests/suites.txt lists every KUnit suite with its cases, for test and kcsan"

python3 "$RMAD_ROOT/scripts/report/insn-report.py" --self-test >/dev/null || failed=1
step "insn-report: the instruction counts' reader on a made-up run"

rustfmt="$(rust_tool rustfmt)"
mapfile -t rust_files < <(cd "$RMAD_ROOT" && git ls-files -co --exclude-standard '*.rs' | grep -v '^tests/host/')
(cd "$RMAD_ROOT" && "$rustfmt" --edition 2021 --check --config-path "$LINUX_TREE/.rustfmt.toml" \
	"${rust_files[@]}") || failed=1
step "rustfmt --check: ${#rust_files[@]} files"

if [ "$failed" -ne 0 ]; then
	die "lint: findings above"
fi
step "lint: clean"

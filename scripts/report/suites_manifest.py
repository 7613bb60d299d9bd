# SPDX-License-Identifier: GPL-2.0
"""tests/suites.txt, the suites each run must produce: one reader for the verdict of a run
(scripts/report/vm-verdict.py) and for `make lint` (scripts/check/check-suites.py)."""

# The kinds of suite the verdict knows.
KINDS = {"kunit", "stress", "vm", "run"}


def read(path):
    """(columns, [(suite, kind, {run: least cases, or None where "-"})], problems).

    The header line is "# suite kind RUN..."; every other line that is not a comment is a row
    with one field per column.
    """
    columns, rows, problems = None, [], []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            if line.startswith("# suite "):
                columns = line[1:].split()
                continue
            fields = line.split("#", 1)[0].split()
            if not fields:
                continue
            if columns is None or len(fields) != len(columns):
                problems.append(f"{path}:{n}: the row does not fit the header")
                continue
            suite, kind, counts = fields[0], fields[1], fields[2:]
            if kind not in KINDS:
                problems.append(f"{path}:{n}: unknown kind {kind}")
            runs = {}
            for run, c in zip(columns[2:], counts):
                if c != "-" and not c.isdigit():
                    problems.append(f"{path}:{n}: '{c}' is neither a number nor '-'")
                    continue
                runs[run] = None if c == "-" else int(c)
            rows.append((suite, kind, runs))
    if columns is None:
        problems.append(f"{path}: no header line ('# suite kind RUN...')")
    return columns or [], rows, problems

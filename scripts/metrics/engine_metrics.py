#!/usr/bin/env python3
"""Counts what a reader of the FSDP engine meets: per file of src/fsdp, its lines and its mode checks, and the
longest functions. A mode check is a branch (an `if`, `while` or `?:` line) that tests how the engine was
configured: the strategy, offload, --no-sync, inference, the reduce dtype, the shard-group size, the resident
and direct paths, the compute dtype, or whether the communicator is stream-ordered.

  scripts/metrics/engine_metrics.py [--dir src/fsdp] [--top 5]
"""
import argparse
import os
import re

MODE = re.compile(r"\b(opt\.(strategy|offload|no_sync|inference|reduce_dtype)|(geo_?|g)\.group\b|geo_\.world\b|"
                  r"direct_params|direct_grads|compute_copy|bf16_reduce|host_states|resident_params\(\)|"
                  r"compute_dtype\(\)|\bcompute\s*[!=]=|stream_ordered\(\)|replica_comm_\.world\(\)|last_micro_)")
BRANCH = re.compile(r"\bif\s*\(|\bwhile\s*\(|\?[^:]*:")


def strip(line):
    line = re.sub(r'"([^"\\]|\\.)*"', '""', line)
    return line.split("//", 1)[0]


def mode_checks(lines):
    n = 0
    for raw in lines:
        line = strip(raw)
        if BRANCH.search(line):
            n += len(MODE.findall(line))
    return n


FUNC = re.compile(r"^[A-Za-z_][\w:<>,\s\*&~]*?\b([\w:~]+)\s*\([^;]*$")


def functions(path, lines):
    """(length, name, line) of each function body defined at column 0 or inside a class (brace matched)."""
    out = []
    i = 0
    while i < len(lines):
        line = strip(lines[i])
        m = FUNC.match(line.strip())
        if m and not line.strip().startswith(("namespace", "struct", "class", "enum", "return", "else", "if", "for",
                                               "while", "switch", "#")):
            # find the opening brace of a definition (not a declaration ending in ';')
            j, text = i, line
            while "{" not in text and ";" not in text and j + 1 < len(lines) and j - i < 6:
                j += 1
                text += strip(lines[j])
            if "{" in text and text.index("{") < (text.index(";") if ";" in text else 10**9):
                depth, k = 0, i
                started = False
                while k < len(lines):
                    s = strip(lines[k])
                    depth += s.count("{") - s.count("}")
                    started |= "{" in s
                    if started and depth <= 0:
                        break
                    k += 1
                out.append((k - i + 1, m.group(1), f"{path}:{i + 1}"))
                i = k + 1
                continue
        i += 1
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", default="src/fsdp")
    ap.add_argument("--top", type=int, default=5)
    a = ap.parse_args()
    rows, funcs = [], []
    for name in sorted(os.listdir(a.dir)):
        if not name.endswith((".h", ".cpp")):
            continue
        path = os.path.join(a.dir, name)
        with open(path) as f:
            lines = f.read().splitlines()
        rows.append((name, len(lines), mode_checks(lines)))
        funcs += functions(path, lines)
    print(f"{'file':24s} {'lines':>6s} {'mode checks':>12s}")
    for name, n, m in rows:
        print(f"{name:24s} {n:6d} {m:12d}")
    print(f"{'total':24s} {sum(r[1] for r in rows):6d} {sum(r[2] for r in rows):12d}")
    print(f"longest functions in {a.dir}:")
    for length, fn, where in sorted(funcs, reverse=True)[:a.top]:
        print(f"  {length:4d} lines  {fn}  ({where})")


if __name__ == "__main__":
    main()

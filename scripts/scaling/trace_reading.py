#!/usr/bin/python3
"""Where a step's exposed communication sits: reads a trace of `gpt memplan --time --trace` (the simulated
step) and prints the step, the collectives on the simulated comm stream, and the stretches of it that no
work on the compute stream covers (a unit's compute, the engine's and the optimizer's ops), each charged to the compute span that runs next (the unit that waited for it), the
largest first.

  scripts/scaling/trace_reading.py TRACE [--top K]
"""
import argparse
import sys

import trace_util as tu

COMM_STREAM, ENGINE_OPS = 5, 7  # src/util/trace.h kCommStream, kEngineStream


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("trace")
    p.add_argument("--top", type=int, default=8)
    a = p.parse_args()
    try:
        ev = tu.load(a.trace)
    except tu.TraceError as e:
        sys.exit(f"trace_reading.py: error: {e}")
    sp = tu.spans(ev, tu.ranks(ev)[0])
    comm = [(s[2], s[3]) for s in sp.get(COMM_STREAM, [])]
    if not comm:
        sys.exit(f"trace_reading.py: error: {a.trace}: no simulated comm stream (write it with gpt memplan --time --trace)")
    compute = sorted((s for s in sp.get(tu.COMPUTE, []) if s[1] == "compute"), key=lambda s: s[2])
    busy = tu.union([(s[2], s[3]) for s in compute] + [(s[2], s[3]) for s in sp.get(tu.OPTIMIZER, [])] +
                    [(s[2], s[3]) for s in sp.get(ENGINE_OPS, [])])
    t0 = min(min(s[2] for v in sp.values() for s in v), 0)
    t1 = max(s[3] for v in sp.values() for s in v)
    exposed = tu.subtract(comm, busy)
    by_next = {}
    for a_us, b_us in exposed:
        nxt = next((s[0] for s in compute if s[2] >= b_us - 1e-9), "the end of the step")
        by_next[nxt] = by_next.get(nxt, 0.0) + (b_us - a_us)
    ms = lambda us: us / 1e3
    print(f"step {ms(t1 - t0):.1f} ms; collectives on the comm stream {ms(tu.length(tu.union(comm))):.1f} ms "
          f"({len(comm)} calls); not covered by compute-stream work {ms(tu.length(exposed)):.1f} ms")
    kinds = {}
    for name, _, c0, c1 in sp.get(COMM_STREAM, []):
        kind = name.split(" ")[0]
        kinds[kind] = kinds.get(kind, 0.0) + tu.length(tu.clip(exposed, c0, c1))
    print("  uncovered, by the collective running then: " +
          ", ".join(f"{k} {ms(v):.1f} ms" for k, v in sorted(kinds.items(), key=lambda kv: -kv[1])))
    for name, us in sorted(by_next.items(), key=lambda kv: -kv[1])[:a.top]:
        print(f"  {ms(us):9.2f} ms before {name}")


if __name__ == "__main__":
    main()

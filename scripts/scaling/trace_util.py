"""Reading the Chrome/Perfetto trace written by `gpt train --trace`: one pid per rank; tids 1 compute,
2 optimizer, 3 data, 4 copies h2d, 8 copies d2h, 100+k gather slot k, 200+k reduce slot k (CPU ranks; on GPU
ranks 5, the comm stream, instead); B/E span pairs; counter events ("ph": "C") "gathered params in use",
"gradient slots in use", "comm bytes in flight" with args.bytes.

A training step on one rank is the window from the first "next_batch" after the previous step's AdamW
ends to the end of this step's AdamW: evaluation and sampling (which run between steps) fall outside it.
Times are microseconds in the file; everything here returns milliseconds relative to the window start.
"""
import json

COMPUTE, OPTIMIZER, DATA, COPIES = 1, 2, 3, 4
GATHER0, REDUCE0 = 100, 200
MEMORY_COUNTERS = ("gathered params in use", "gradient slots in use")
FLIGHT_COUNTER = "comm bytes in flight"


class TraceError(Exception):
    pass


def load(path):
    try:
        with open(path) as f:
            doc = json.load(f)
    except OSError as e:
        raise TraceError(f"{path}: cannot read the trace ({e.strerror})")
    except json.JSONDecodeError as e:
        raise TraceError(f"{path}: not JSON ({e.msg} at line {e.lineno})")
    events = doc.get("traceEvents") if isinstance(doc, dict) else doc
    if not isinstance(events, list) or not events:
        raise TraceError(f"{path}: no traceEvents (was it written by gpt train --trace?)")
    return events


def ranks(events):
    return sorted({e["pid"] for e in events if e.get("ph") in ("B", "C") and "pid" in e})


def spans(events, pid):
    """{tid: [(name, cat, start_us, end_us)]} from the B/E pairs of one rank (nested pairs allowed)."""
    stacks, out = {}, {}
    for e in events:
        if e.get("pid") != pid or e.get("ph") not in ("B", "E"):
            continue
        tid = e.get("tid")
        if e["ph"] == "B":
            stacks.setdefault(tid, []).append(e)
        elif stacks.get(tid):
            b = stacks[tid].pop()
            out.setdefault(tid, []).append((b.get("name", ""), b.get("cat", ""), b["ts"], e["ts"]))
    for v in out.values():
        v.sort(key=lambda s: s[2])
    return out


def counters(events, pid):
    """{name: [(ts_us, bytes)]} sorted by time."""
    out = {}
    for e in events:
        if e.get("pid") == pid and e.get("ph") == "C":
            out.setdefault(e.get("name", ""), []).append((e["ts"], float(e.get("args", {}).get("bytes", 0.0))))
    for v in out.values():
        v.sort()
    return out


def step_windows(sp):
    """[(start_us, end_us)] of every complete step of one rank, in order."""
    opt = [s for s in sp.get(OPTIMIZER, [])]
    data = [s for s in sp.get(DATA, []) if s[0] == "next_batch"]
    wins, prev_end = [], float("-inf")
    for _, _, o_start, o_end in opt:
        firsts = [d[2] for d in data if prev_end < d[2] < o_start]
        if firsts:
            wins.append((firsts[0], o_end))
        prev_end = o_end
    return wins


def last_step_window(sp, pid):
    wins = step_windows(sp)
    if not wins:
        raise TraceError(f"rank {pid}: the trace holds no complete training step (next_batch ... adamw)")
    return wins[-1], len(wins)


def clip(intervals, t0, t1):
    return [(max(a, t0), min(b, t1)) for a, b in intervals if b > t0 and a < t1]


def union(intervals):
    out = []
    for a, b in sorted(intervals):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def length(intervals):
    return sum(b - a for a, b in intervals)


def subtract(a_list, b_list):
    """Parts of the union of a_list not covered by the union of b_list."""
    a_list, b_list = union(a_list), union(b_list)
    out, j = [], 0
    for a, b in a_list:
        cur = a
        while j < len(b_list) and b_list[j][1] <= cur:
            j += 1
        k = j
        while k < len(b_list) and b_list[k][0] < b:
            s, e = b_list[k]
            if s > cur:
                out.append((cur, s))
            cur = max(cur, e)
            k += 1
        if cur < b:
            out.append((cur, b))
    return out


def comm_intervals(sp):
    return [(s[2], s[3]) for tid, v in sp.items() if tid >= GATHER0 for s in v]


def compute_intervals(sp):
    """Compute-track spans that are real work (category compute) plus the optimizer; a 'wait for
    reductions' span on the compute track is waiting, not compute."""
    out = [(s[2], s[3]) for s in sp.get(COMPUTE, []) if s[1] == "compute"]
    out += [(s[2], s[3]) for s in sp.get(OPTIMIZER, [])]
    return out


def overlap_report(events):
    """Per rank over its last complete step: step ms, communication ms (union of gather/reduce slot
    spans), exposed ms (communication not covered by compute) and exposed / step."""
    rows = []
    for pid in ranks(events):
        sp = spans(events, pid)
        (t0, t1), nsteps = last_step_window(sp, pid)
        comm = union(clip(comm_intervals(sp), t0, t1))
        comp = union(clip(compute_intervals(sp), t0, t1))
        exposed = subtract(comm, comp)
        step = t1 - t0
        rows.append({"rank": pid, "step": nsteps, "step_ms": step / 1e3, "comm_ms": length(comm) / 1e3,
                     "exposed_ms": length(exposed) / 1e3, "compute_ms": length(comp) / 1e3,
                     "exposed_fraction": length(exposed) / step if step > 0 else 0.0})
    return rows

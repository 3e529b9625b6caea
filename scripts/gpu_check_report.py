#!/usr/bin/env python3
"""Readers for scripts/gpu_check.sh (plain Python 3, no torch needed): they turn a stage's output into one
line and one JSON object, and write the summary.

  gpu_check_report.py gtest OUT            test counts of a gtest run, and whether it is clean (JSON)
  gpu_check_report.py gtest-line JSON      the same as one line
  gpu_check_report.py peak [--json] MEMPLAN_OUT BENCH_JSON
                                           `gpt memplan --json`'s device peak against `gpt bench --json`'s
  gpu_check_report.py racecheck OUT RC     compute-sanitizer racecheck: ok | failed | timeout | skipped (JSON)
  gpu_check_report.py field JSON_FILE KEY  one top-level field of a JSON file, as text
  gpu_check_report.py trace TRACE_JSON     spans per track of rank 0 in a --trace file, and the compute
                                           stream's busy share of the last step (exit 1: no compute span)
  gpu_check_report.py summary --stages TSV --results DIR --out JSON [--gpu NAME --budget S --elapsed S]
                                           writes the summary JSON and prints the verdict line

A gtest run is clean when it finished, at least one test passed, none failed, and none was skipped except
the tests that can only run without a GPU (their skip message says a GPU is visible). On a GPU machine any
other skip means a check did not run, which this script counts as a failure.
"""
import json
import os
import re
import sys

ALLOWED_SKIP = re.compile(r"GPU is visible", re.I)


def gtest(text):
    tests, order, cur, msg = {}, [], None, []
    summary = re.search(r"^\[==========\] (\d+) tests? from .* ran", text, re.M)
    for line in text.splitlines():
        m = re.match(r"^\[ RUN      \] (\S+)", line)
        if m:
            cur, msg = m.group(1), []
            tests[cur] = "unfinished"
            order.append(cur)
            continue
        m = re.match(r"^\[ +(OK|FAILED|SKIPPED) +\] (\S+)", line)
        if m and m.group(2) == cur:
            tests[cur] = {"OK": "passed", "FAILED": "failed", "SKIPPED": "skipped"}[m.group(1)]
            if tests[cur] == "skipped":
                reason = " ".join(l.strip() for l in msg if l.strip() and not l.rstrip().endswith("Skipped"))
                tests[cur] = ("skipped", reason)
            cur = None
            continue
        if cur:
            msg.append(line)
    res = {"passed": 0, "failed": 0, "skipped": 0, "failed_tests": [], "skipped_tests": [], "unfinished": []}
    for name in order:
        st = tests[name]
        if st == "passed":
            res["passed"] += 1
        elif st == "failed":
            res["failed"] += 1
            res["failed_tests"].append(name)
        elif st == "unfinished":
            res["unfinished"].append(name)
        else:
            res["skipped"] += 1
            res["skipped_tests"].append({"name": name, "reason": st[1][:200], "allowed": bool(ALLOWED_SKIP.search(st[1]))})
    bad_skips = [s["name"] for s in res["skipped_tests"] if not s["allowed"]]
    res["finished"] = bool(summary) and not res["unfinished"]
    res["clean"] = res["finished"] and res["passed"] > 0 and res["failed"] == 0 and not bad_skips
    return res


def gtest_line(g):
    s = f"{g['passed']} passed, {g['failed']} failed, {g['skipped']} skipped"
    allowed = [t["name"] for t in g["skipped_tests"] if t["allowed"]]
    bad = [f"{t['name']} ({t['reason'][:80]})" for t in g["skipped_tests"] if not t["allowed"]]
    if allowed:
        s += f" (allowed: {', '.join(allowed)})"
    if bad:
        s += f"; skipped on a GPU machine, so NOT RUN: {'; '.join(bad[:5])}"
    if g["failed_tests"]:
        s += f"; failed: {', '.join(g['failed_tests'][:8])}"
    if not g["finished"]:
        s += f"; the run did not finish ({', '.join(g['unfinished'][:3]) or 'no gtest summary line'})"
    return s


def last_json(text):
    for line in reversed(text.splitlines()):
        line = line.strip()
        if line.startswith("{") and line.endswith("}"):
            try:
                return json.loads(line)
            except ValueError:
                pass
    return None


def peak(memplan_out, bench_json):
    """memplan's device_peak_bytes (exact) against the bench's peak, exactly when the bench gives bytes,
    else to the precision it printed (6 significant digits of MiB)."""
    plan = last_json(open(memplan_out).read())
    btext = open(bench_json).read()
    bench = last_json(btext)
    if not plan or "device_peak_bytes" not in plan:
        return False, {"error": "gpt memplan --json printed no device_peak_bytes"}, "gpt memplan --json printed no device_peak_bytes"
    if not bench:
        return False, {"error": "no bench JSON"}, "no gpt bench JSON to compare with"
    pb = int(plan["device_peak_bytes"])
    if "peak_device_bytes" in bench:
        bb = int(bench["peak_device_bytes"])
        ok = bb == pb
        return ok, {"memplan_bytes": pb, "bench_bytes": bb, "exact": True}, \
            f"memplan device peak {pb} B {'==' if ok else '!='} bench peak_device_bytes {bb} B" + \
            ("" if ok else f" (difference {bb - pb:+d} B)")
    m = re.search(r'"peak_device_mib":\s*([-+0-9.eE]+)', btext)
    if not m:
        return False, {"error": "bench JSON has no peak_device_mib"}, "gpt bench --json printed no peak_device_mib"
    s = m.group(1)
    mant, _, exp = s.lower().partition("e")
    decimals = len(mant.split(".")[1]) if "." in mant else 0
    tol = 0.5 * 10.0 ** (int(exp or 0) - decimals)  # half a unit in the last printed digit
    plan_mib = pb / 2 ** 20
    diff = float(s) - plan_mib
    ok = abs(diff) <= tol * (1 + 1e-9)
    return ok, {"memplan_bytes": pb, "memplan_mib": plan_mib, "bench_mib": float(s), "print_tolerance_mib": tol,
                "exact": False}, \
        (f"memplan device peak {pb} B = {plan_mib:.6f} MiB {'matches' if ok else 'DIFFERS FROM'} bench peak_device_mib {s} "
         f"(printed to 6 significant digits: +-{tol:g} MiB{'' if ok else f'; difference {diff:+.4f} MiB'}); "
         "exact to the byte only once gpt bench --json prints peak_device_bytes")


def racecheck(text, rc):
    rc = int(rc)
    g = gtest(text)
    m = re.search(r"(?i)^.*device not supported.*$", text, re.M) or \
        (re.search(r"(?i)^.*(error 999|CUDA_ERROR_UNKNOWN|cudaErrorUnknown).*$", text, re.M) if g["passed"] == 0 else None)
    if m:
        return {"status": "skipped", "note": "compute-sanitizer refuses this device: " + m.group(0).strip()[:160],
                "gtest": g}
    s = re.search(r"RACECHECK SUMMARY: (\d+) hazards? displayed \((\d+) errors?, (\d+) warnings?\)", text)
    errors, warnings = (int(s.group(2)), int(s.group(3))) if s else (None, None)
    if rc in (124, 137):
        status, note = "timeout", "racecheck did not finish within its cap"
    elif errors:
        # Name where: a hazard inside NVIDIA's kernels (cuBLASLt's, on the simple path) is not the project's.
        where = [ln.strip("= ").strip()[:160] for ln in text.splitlines() if "Race reported" in ln][:2]
        status, note = "failed", f"{errors} race hazard error(s), {warnings} warning(s)" + \
            ("; first: " + " | ".join(where) if where else "")
    elif not g["clean"]:
        status, note = "failed", "the attention twin tests under racecheck: " + gtest_line(g)
    elif rc != 0:
        status, note = "failed", f"compute-sanitizer exited {rc}"
    else:
        status, note = "ok", f"0 race errors, {warnings if warnings is not None else '?'} warning(s); {g['passed']} attention tests passed under racecheck"
    if s is None and status == "ok":
        status, note = "failed", "no RACECHECK SUMMARY line in the output"
    return {"status": status, "note": note, "errors": errors, "warnings": warnings, "gtest": g}


def trace_tracks(path):
    """Rank 0's spans per track name of a --trace file: {track: [(name, t0_us, t1_us), ...]}."""
    doc = json.load(open(path))
    names, open_spans, spans = {}, {}, {}
    for e in doc["traceEvents"]:
        if e.get("pid") != 0:
            continue
        if e["ph"] == "M" and e.get("name") == "thread_name":
            names[e["tid"]] = e["args"]["name"]
        elif e["ph"] == "B":
            open_spans.setdefault(e["tid"], []).append((e["name"], e["ts"]))
        elif e["ph"] == "E" and open_spans.get(e["tid"]):
            n, t0 = open_spans[e["tid"]].pop()
            spans.setdefault(e["tid"], []).append((n, t0, e["ts"]))
    return {names.get(t, str(t)): v for t, v in spans.items()}


def trace_note(path):
    """One line: spans per track, and how much of the last step the compute stream was busy."""
    tracks = trace_tracks(path)
    counts = ", ".join(f"{k} {len(v)}" for k, v in sorted(tracks.items()))
    compute = tracks.get("compute", [])
    if not compute:
        return False, f"{path}: no span on the compute track ({counts or 'no spans at all'})"
    firsts = [t0 for n, t0, _ in compute if n == "forward embed"]
    t0 = firsts[-1] if firsts else compute[0][1]
    last = [(a, b) for _, a, b in compute if a >= t0]
    end = max(b for _, b in last)
    busy = sum(b - a for a, b in last)
    span_ms, busy_pct = 1e-3 * (end - t0), 100 * busy / max(end - t0, 1e-9)
    return True, f"spans per track: {counts}; last step on the compute stream {span_ms:.2f} ms, busy {busy_pct:.0f}%"


def fmt_tok(x):
    return f"{x / 1e3:.0f}k" if x >= 1e4 else f"{x:.0f}"


def summary(args):
    def opt(name, default=None):
        return args[args.index(name) + 1] if name in args else default

    stages = []
    with open(opt("--stages")) as f:
        for line in f:
            p = line.rstrip("\n").split("\t")
            if len(p) >= 6:
                stages.append({"name": p[0], "status": p[1], "rc": int(p[2]) if p[2].lstrip("-").isdigit() else None,
                               "seconds": float(p[3] or 0), "gate": p[4] == "1", "note": p[5]})
    results = {}
    rdir = opt("--results")
    for fn in sorted(os.listdir(rdir)):
        if fn.endswith(".json"):
            try:
                results[fn[:-5]] = json.load(open(os.path.join(rdir, fn)))
            except ValueError:
                results[fn[:-5]] = {"unparsed": open(os.path.join(rdir, fn)).read()[:2000]}
    failed = [s["name"] for s in stages if s["gate"] and s["status"] not in ("ok", "skipped")]
    ok = not failed
    st = {s["name"]: s for s in stages}

    def stage_word(name):
        s = st.get(name)
        return s["status"] if s else "not-run"

    parts = [f"gpu_check: {'PASS' if ok else 'FAIL'}"]
    tw = results.get("twins")
    parts.append(f"twins {tw['passed']}/{tw['passed'] + tw['failed'] + len([t for t in tw['skipped_tests'] if not t['allowed']])}"
                 if tw else f"twins {stage_word('twins')}")
    c = results.get("correctness")
    cw = stage_word("correctness")
    if isinstance(c, dict) and c.get("checks"):
        cw += f" ({sum(x['ok'] for x in c['checks'])}/{len(c['checks'])} checks)"
    parts.append(f"correctness={cw}")
    mem = [s for s in stages if s["name"].startswith("memplan_")]
    parts.append("memplan=" + ("ok" if mem and all(s["status"] == "ok" for s in mem) else
                               ",".join(f"{s['name'][8:]}:{s['status']}" for s in mem) or "not-run"))
    rc = st.get("racecheck")
    parts.append(f"racecheck={rc['status'] if rc else 'not-run'}")
    speed = {"gpt": {}, "torch": None, "ratio": {}}
    for s in stages:  # in the order they ran
        r = results.get(s["name"])
        if s["name"].startswith("bench_") and not s["name"].startswith("bench_d48") and isinstance(r, dict) \
                and "tokens_per_s" in r:
            speed["gpt"][s["name"][6:]] = {k: r.get(k) for k in ("tokens_per_s", "mfu", "ms_per_step", "peak_device_mib",
                                                                   "B", "T", "attention", "peak_tflops_per_rank",
                                                                   "peak_source")}
    t = results.get("torch_peer")
    if isinstance(t, dict) and "tokens_per_s" in t:
        speed["torch"] = {k: t.get(k) for k in ("tokens_per_s", "mfu", "ms_per_step", "mode", "compile", "attention",
                                                "adamw", "amp", "framework", "eager_tokens_per_s", "B", "T")}
    if speed["gpt"]:
        g0 = next(iter(speed["gpt"].values()))
        bits = [f"d12 B{g0['B']} T{g0['T']}:"]
        for p, g in speed["gpt"].items():
            bits.append(f"{p} {fmt_tok(g['tokens_per_s'])} tok/s ({100 * g['mfu']:.1f}% MFU)")
        parts.append(" ".join(bits))
    if speed["torch"]:
        tt = speed["torch"]
        parts.append(f"torch {tt['mode']} {fmt_tok(tt['tokens_per_s'])} tok/s ({100 * (tt.get('mfu') or 0):.1f}% MFU)")
        for p, g in speed["gpt"].items():
            speed["ratio"][p] = g["tokens_per_s"] / tt["tokens_per_s"]
        if speed["ratio"]:
            parts.append("gpt/torch " + " ".join(f"{p} {r:.2f}" for p, r in speed["ratio"].items()))
    if failed:
        parts.append(f"failed: {', '.join(failed)}")
    parts.append(f"({opt('--elapsed', '?')} s)")
    verdict = "  ".join(parts)
    out = {"verdict": verdict, "pass": ok, "failed_stages": failed, "gpu": opt("--gpu", ""),
           "budget_s": float(opt("--budget", 0)), "elapsed_s": float(opt("--elapsed", 0)), "speed": speed,
           "stages": stages, "results": results}
    with open(opt("--out"), "w") as f:
        json.dump(out, f, indent=1)
    print(verdict)


def main():
    a = sys.argv[1:]
    if not a or a[0] in ("-h", "--help"):
        print(__doc__)
        return 0
    cmd = a[0]
    if cmd == "gtest":
        print(json.dumps(gtest(open(a[1], errors="replace").read())))
    elif cmd == "gtest-line":
        print(gtest_line(json.load(open(a[1]))))
    elif cmd == "peak":
        as_json = "--json" in a
        files = [x for x in a[1:] if x != "--json"]
        try:
            ok, obj, line = peak(files[0], files[1])
        except OSError as e:
            ok, obj, line = False, {"error": str(e)}, str(e)
        obj["ok"] = ok
        obj["note"] = line
        print(json.dumps(obj) if as_json else line)
        return 0 if ok else 1
    elif cmd == "racecheck":
        print(json.dumps(racecheck(open(a[1], errors="replace").read(), a[2])))
    elif cmd == "field":
        try:
            v = json.load(open(a[1])).get(a[2], "")
        except (OSError, ValueError):
            v = ""
        print(v if isinstance(v, str) else json.dumps(v))
    elif cmd == "trace":
        try:
            ok, line = trace_note(a[1])
        except (OSError, ValueError, KeyError) as e:
            ok, line = False, f"{a[1]}: {e}"
        print(line)
        return 0 if ok else 1
    elif cmd == "summary":
        summary(a[1:])
    else:
        print(f"gpu_check_report.py: unknown command {cmd}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())

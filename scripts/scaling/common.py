"""Shared plumbing for the scaling scripts: argument checks with one-line errors, launching `gpt` on N
MPI ranks, reading its metrics JSONL and `gpt memplan` JSON, the model's parameter layout computed from
its shape (so formulas are checked against an independent count), and CSV / markdown table writers.

Every script in this folder takes --gpt PATH, --out DIR and --quick; a user mistake ends the script with
"<script>: error: <what was expected>" and exit status 2, never a traceback.
"""
import argparse
import csv
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
MAX_RANKS = 64  # CPU ranks are processes on one machine: beyond this a sweep is a typo, not a plan
BYTE_VOCAB = 257


class UserError(Exception):
    """A mistake in the arguments or the environment, reported as one line."""


def die(msg):
    prog = Path(sys.argv[0]).name
    print(f"{prog}: error: {msg}", file=sys.stderr)
    sys.exit(2)


FAILED_RUNS = []  # run logs of sweeps in which some gpt run failed (see finish_scratch)


def main_guard(fn):
    """Runs fn(), turning UserError into a one-line message and exit status 2; a sweep whose gpt runs
    failed still writes its outputs (the failures are rows with their error) and then exits with status 1."""
    try:
        fn()
    except UserError as e:
        die(str(e))
    except KeyboardInterrupt:
        die("interrupted")
    if FAILED_RUNS:
        print(f"{Path(sys.argv[0]).name}: error: some gpt runs failed (see the status column; run log in "
              f"{', '.join(FAILED_RUNS)})", file=sys.stderr)
        sys.exit(1)


def base_parser(name, description):
    p = argparse.ArgumentParser(description=description)  # prog: the script's own file name, for its errors
    p.add_argument("--gpt", default="build/gpt", help="path of the gpt binary (default build/gpt)")
    p.add_argument("--out", default=None, help=f"output folder (default docs/results/{name})")
    p.add_argument("--quick", action="store_true", help="a fast mode (seconds to a minute) that still writes the CSV")
    p.add_argument("--mpiexec", default="mpiexec", help="MPI launcher for N > 1 ranks (default mpiexec)")
    p.add_argument("--timeout", type=float, default=1800, help="seconds allowed per gpt run (default 1800)")
    return p


def out_dir(args, name):
    d = Path(args.out) if args.out else REPO / "docs" / "results" / name
    try:
        d.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UserError(f"--out {d}: cannot create the folder ({e.strerror})")
    return d


def check_gpt(path):
    """The gpt binary as an absolute path; relative paths are tried from the cwd, then the repository."""
    p = Path(path)
    for cand in ([p] if p.is_absolute() else [Path.cwd() / p, REPO / p]):
        if cand.is_file() and os.access(cand, os.X_OK):
            return str(cand.resolve())
    raise UserError(f"--gpt {path}: no executable there (build it: cmake -S . -B build -G Ninja && ninja -C build gpt)")


def int_list(text, flag, lo=1, hi=None):
    try:
        vals = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise UserError(f"{flag}: expected comma-separated integers, got '{text}'")
    if not vals:
        raise UserError(f"{flag}: expected at least one value")
    for v in vals:
        if v < lo or (hi is not None and v > hi):
            raise UserError(f"{flag}: {v} is outside [{lo}, {hi if hi is not None else 'inf'}]")
    return vals


def choice_list(text, flag, allowed):
    vals = [x.strip() for x in text.split(",") if x.strip()]
    if not vals:
        raise UserError(f"{flag}: expected at least one of {', '.join(allowed)}")
    for v in vals:
        if v not in allowed and not (v.startswith("every:") and "every:K" in allowed):
            raise UserError(f"{flag}: unknown value '{v}' (expected {', '.join(allowed)})")
        if v.startswith("every:"):
            k = v[len("every:"):]
            if not k.isdigit() or int(k) < 1:
                raise UserError(f"{flag}: '{v}' needs a positive integer K in every:K")
    return vals


def check_ranks(ranks, flag, max_ranks, launcher="mpiexec"):
    if max_ranks < 1 or max_ranks > MAX_RANKS:
        raise UserError(f"--max-ranks: {max_ranks} is outside [1, {MAX_RANKS}]")
    for n in ranks:
        if n > max_ranks:
            raise UserError(f"{flag}: {n} ranks is more than allowed (--max-ranks {max_ranks})")
    if max(ranks) > 1 and shutil.which(launcher) is None:
        raise UserError(f"{flag}: {max(ranks)} ranks need the MPI launcher '{launcher}' (install openmpi-bin, "
                        "or name it with --mpiexec)")


def check_shard_group(strategies, ranks, group):
    """hybrid shards inside groups of G ranks: every N of the sweep must be a multiple of G."""
    if "hybrid" not in strategies:
        if group:
            raise UserError("--shard-group: only meaningful with --strategies containing hybrid")
        return
    if not group:
        raise UserError("--strategies hybrid needs --shard-group G")
    for n in ranks:
        if n % group:
            raise UserError(f"--shard-group {group}: world size {n} is not divisible by it")


# ---------------------------------------------------------------------------------------------------------
# Model shapes: the depth family dL (L layers, L heads of 64 channels, C = 64L), the same family as
# `gpt memplan --budget` and the presets d2, d4, d6, d12.


def family_shape(name):
    """'d6' -> (L, NH, C) of the depth family; raises UserError for anything else."""
    if not (name.startswith("d") and name[1:].isdigit() and 1 <= int(name[1:]) <= 48):
        raise UserError(f"--configs: '{name}' is not a depth-family name d1..d48 (L layers, L heads, C = 64L)")
    L = int(name[1:])
    return L, L, 64 * L


def model_flags(name, vocab, max_t):
    L, NH, C = family_shape(name)
    return ["--n-layer", str(L), "--n-head", str(NH), "--d-model", str(C), "--vocab", str(vocab),
            "--seq-len", str(max_t)]


def padded_vocab(v):
    return (v + 127) // 128 * 128


def unit_numels(L, C, vocab, max_t):
    """Elements of each sharding unit in forward order: embed (wte Vp*C + wpe maxT*C), L blocks
    (12C^2 + 13C each), head (lnf: 2C)."""
    embed = padded_vocab(vocab) * C + max_t * C
    block = 12 * C * C + 13 * C
    return [embed] + [block] * L + [2 * C]


def non_embedding_params(L, C):
    return L * (12 * C * C + 13 * C) + 2 * C


def pad_to(n, g):
    return (n + g - 1) // g * g


# ---------------------------------------------------------------------------------------------------------
# Running gpt


def mpi_env(threads=1):
    env = dict(os.environ)
    env.update({"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
                "OMP_NUM_THREADS": str(threads), "OPENBLAS_NUM_THREADS": str(threads)})
    return env


def last_json(out):
    """The last line of a command's output that is one JSON object (gpt's --json result), or None."""
    for line in reversed(out.splitlines()):
        line = line.strip()
        if line.startswith("{") and line.endswith("}"):
            return json.loads(line)
    return None


def launch(args, n, argv):
    """The command line for argv on n ranks (one process needs no launcher)."""
    if n == 1:
        return list(argv)
    return [args.mpiexec, "-n", str(n), "--oversubscribe", "--bind-to", "none"] + list(argv)


def run(cmd, env, timeout, log=None):
    """Runs cmd; returns (returncode, seconds, combined output). A timeout is returncode 124."""
    t0 = time.time()
    try:
        p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=timeout)
        rc, out = p.returncode, p.stdout
    except subprocess.TimeoutExpired as e:
        rc, out = 124, (e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
    dt = time.time() - t0
    if log is not None:
        with open(log, "a") as f:
            f.write("$ " + " ".join(cmd) + f"\n# rc={rc} seconds={dt:.1f}\n{out}\n")
    return rc, dt, out


def last_error_line(out):
    lines = [l for l in out.splitlines() if "error" in l.lower()]
    return (lines[-1] if lines else (out.strip().splitlines() or ["no output"])[-1])[:200]


def read_metrics(path):
    rows = []
    try:
        with open(path) as f:
            for line in f:
                line = line.strip()
                if line:
                    rows.append(json.loads(line))
    except (OSError, json.JSONDecodeError):
        return []
    return rows


def memplan_available(gpt):
    try:
        p = subprocess.run([gpt, "memplan", "--help"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           timeout=60)
        return p.returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def memplan(gpt, argv):
    """`gpt memplan ARGV --json` as a dict, or None when it fails (an invalid combination, or no memplan)."""
    try:
        p = subprocess.run([gpt, "memplan"] + list(argv) + ["--json"], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if p.returncode != 0:
        return None
    try:
        return json.loads(p.stdout.strip().splitlines()[-1])
    except (json.JSONDecodeError, IndexError):
        return None


def ensure_byte_data(gpt, data_dir=None):
    """Tiny Shakespeare as byte-level llm.c shards (tokenized on first use); returns (train, val) globs."""
    d = Path(data_dir) if data_dir else REPO / "data" / "tinyshakespeare_byte"
    if not (d / "train_000000.bin").is_file():
        src = REPO / "data" / "tinyshakespeare" / "input.txt"
        if not src.is_file():
            raise UserError(f"{src}: Tiny Shakespeare text is missing")
        rc, _, out = run([gpt, "tokenize", "--tokenizer", "byte", "--input", str(src), "--out", str(d)],
                         dict(os.environ), 600)
        if rc != 0:
            raise UserError(f"gpt tokenize failed: {last_error_line(out)}")
    return str(d / "train_*.bin"), str(d / "val_*.bin")


def scratch(name):
    """A scratch folder for one sweep's metrics files, traces and run log (runs.log)."""
    d = tempfile.mkdtemp(prefix=f"{name}_")
    progress(f"scratch folder (metrics, traces, runs.log): {d}")
    return d


def finish_scratch(tmp, rows):
    """Deletes the scratch folder when every run succeeded or was skipped on purpose; otherwise keeps it
    and says where the run log is."""
    bad = [r for r in rows if not str(r.get("status", "")).startswith(("ok", "skipped"))]
    if bad:
        progress(f"{len(bad)} run(s) failed: metrics and the run log are kept in {tmp} (runs.log)")
        FAILED_RUNS.append(str(Path(tmp) / "runs.log"))
    else:
        shutil.rmtree(tmp, ignore_errors=True)


def available_memory_bytes():
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


# ---------------------------------------------------------------------------------------------------------
# Output


def write_csv(path, rows, fields):
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields, extrasaction="ignore")
        w.writeheader()
        for r in rows:
            w.writerow({k: ("" if r.get(k) is None else r.get(k)) for k in fields})


def read_csv(path):
    try:
        with open(path, newline="") as f:
            return list(csv.DictReader(f))
    except OSError:
        return []


def md_table(rows, cols):
    """cols: list of (header, fn(row) -> str)."""
    head = "| " + " | ".join(h for h, _ in cols) + " |"
    sep = "|" + "|".join("---" for _ in cols) + "|"
    body = ["| " + " | ".join(str(fn(r)) for _, fn in cols) + " |" for r in rows]
    return "\n".join([head, sep] + body)


def mib(b):
    if b is None or b == "" or (isinstance(b, float) and math.isnan(b)):
        return "n/a"
    return f"{float(b) / 1048576:.2f}"


def na(x, fmt="{}"):
    return "n/a" if x is None or x == "" else fmt.format(x)


def plain_log_ticks(ax, axis="y"):
    """Tick labels on a log axis as plain numbers (12, 40, 0.5) instead of 4x10^1. Call after plotting:
    an axis spanning less than a decade gets evenly spaced labelled ticks instead of the decade ones."""
    from matplotlib.ticker import FuncFormatter, MaxNLocator, NullFormatter

    target = ax.yaxis if axis == "y" else ax.xaxis
    lo, hi = ax.get_ylim() if axis == "y" else ax.get_xlim()
    if lo > 0 and hi / lo < 10:
        ticks = [t for t in MaxNLocator(6).tick_values(lo, hi) if lo <= t <= hi and t > 0]
        (ax.set_yticks if axis == "y" else ax.set_xticks)(ticks)
        target.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        target.set_minor_formatter(NullFormatter())
        (ax.set_ylim if axis == "y" else ax.set_xlim)(lo, hi)
        return
    target.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    target.set_minor_formatter(FuncFormatter(lambda v, _: f"{v:g}" if f"{v:g}"[0] in "25" else ""))


def command_line():
    """How this script was invoked, for results.md."""
    script = Path(sys.argv[0])
    try:
        script = script.resolve().relative_to(REPO)
    except ValueError:
        pass
    return " ".join(["/usr/bin/python3", str(script)] + sys.argv[1:])


def progress(msg):
    print(msg, flush=True)

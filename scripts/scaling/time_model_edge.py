#!/usr/bin/env python3
"""What the product-shape edge (gemm_edge, src/plan/gemm_shape.h) changes in the time model's predictions on
this machine, on the measurements time_model_measure.py already made: every configuration of OUT/measured.csv
is predicted again from the same hardware file with its profiles' edges removed (which prices products by
M*N*K alone, as before the edge), and set beside the measured step and the prediction with the edge.

Predictions only (gpt memplan --time): it runs in seconds and needs no idle machine.
Writes OUT/edge_ablation.csv and OUT/edge_ablation.md.
  usage: time_model_edge.py [--gpt build/gpt] [--out docs/results/time_model] [-B 4] [-T 64] [--quick]
"""
import json
import statistics
import tempfile
from pathlib import Path

import common as c


def strip_edges(src, dst):
    h = json.loads(Path(src).read_text())
    for p in h.get("profiles", []):
        p.pop("gemm_edge", None)
        p.pop("gemm_backward_edge", None)
    Path(dst).write_text(json.dumps(h))


def predict(gpt, row, hw, B, T):
    argv = ["--config", row["preset"], "--world", row["N"], "-B", str(B), "-T", str(T), *row["flags"].split(),
            "--time", "--hardware", str(hw)]
    out = c.memplan(gpt, argv)
    if out is None:
        raise c.UserError(f"gpt memplan {' '.join(argv)} failed")
    return out["time"]["step_ms"]


def main():
    p = c.base_parser("time_model", __doc__.split("\n")[0])
    p.add_argument("-B", type=int, default=4, help="per-rank micro-batch time_model_measure.py ran (default 4)")
    p.add_argument("-T", type=int, default=64, help="sequence length time_model_measure.py ran (default 64)")
    a = p.parse_args()
    gpt = c.check_gpt(a.gpt)
    out = Path(a.out) if a.out else c.REPO / "docs/results/time_model"
    rows = c.read_csv(out / "measured.csv") if (out / "measured.csv").exists() else []
    if not rows:
        raise c.UserError(f"--out {out}: no measured.csv with rows (run time_model_measure.py first)")
    if a.quick:
        rows = rows[:3]
    with tempfile.TemporaryDirectory() as tmp:
        stripped = {}
        for r in rows:
            hw = out / r["hardware_file"]
            if not hw.exists():
                raise c.UserError(f"{out / 'measured.csv'}: hardware file {hw} is missing")
            if hw not in stripped:
                stripped[hw] = Path(tmp) / f"{len(stripped)}.json"
                strip_edges(hw, stripped[hw])
            r["predicted_no_edge_ms"] = round(predict(gpt, r, stripped[hw], a.B, a.T), 2)
            r["predicted_edge_ms"] = round(predict(gpt, r, hw, a.B, a.T), 2)
    by = {}
    for r in rows:
        by.setdefault(r["config"], []).append(r)
    table = []
    for cfg, rs in by.items():
        meas = statistics.median(float(x["measured_ms"]) for x in rs)
        edge = statistics.median(x["predicted_edge_ms"] for x in rs)
        plain = statistics.median(x["predicted_no_edge_ms"] for x in rs)
        table.append({"configuration": cfg, "measured ms": round(meas, 1), "predicted ms, edge": round(edge, 1),
                      "error, edge": f"{100 * (edge - meas) / meas:+.1f}%", "predicted ms, M*N*K alone": round(plain, 1),
                      "error, M*N*K alone": f"{100 * (plain - meas) / meas:+.1f}%"})
    c.write_csv(out / "edge_ablation.csv", rows, list(rows[0].keys()))

    def summary(key):
        e = sorted(abs(float(t[key].rstrip("%"))) for t in table)
        return f"median |error| {statistics.median(e):.1f}%, max {max(e):.1f}%, {sum(x <= 15 for x in e)} of {len(e)} within 15%"
    text = (f"# The product-shape edge, on and off, over the same measurements\n\nMedians over rounds of "
            f"{out / 'measured.csv'}; each round's prediction from that round's hardware file, with its edges and "
            f"with them removed.\n\n- with the edge: {summary('error, edge')}\n- M*N*K alone: "
            f"{summary('error, M*N*K alone')}\n\n" + c.md_table(table, [(k, lambda t, k=k: t[k]) for k in table[0]]) + "\n\n" +
            f"Command: `{c.command_line()}`\n")
    (out / "edge_ablation.md").write_text(text)
    print(text)


if __name__ == "__main__":
    c.main_guard(main)

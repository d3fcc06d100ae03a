"""Turn the runs of ``elastic_loss_curves.py`` into a verdict, hash tables and a loss-curve plot.

Each resumed run is compared with the uninterrupted base run, step by step from the checkpoint
on: is the global batch the same (SHA-256), and how far apart are the losses.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

KINDS = {"zephon": "Zephon", "standard": "DataLoader + DistributedSampler"}
FLOOR = 1e-9  # |loss difference| of exactly 0 is drawn here on the log scale


def load_runs(out: Path, exp: Any) -> dict[tuple[str, str, int], dict[str, Any]]:
    runs = {}
    for kind in KINDS:
        runs[(kind, "base", exp.base_world)] = json.loads(
            (out / "runs" / f"{kind}-base-w{exp.base_world}.json").read_text()
        )
        for w in exp.worlds:
            runs[(kind, "resume", w)] = json.loads((out / "runs" / f"{kind}-resume-w{w}.json").read_text())
    return runs


def compare(base: dict[str, Any], resumed: dict[str, Any], k: int) -> dict[str, Any]:
    """Hash matches and loss differences of ``resumed`` against ``base`` on the steps from ``k`` on."""
    b = dict(zip(base["steps"], zip(base["hash"], base["loss"])))
    same = [b[s][0] == h for s, h in zip(resumed["steps"], resumed["hash"])]
    diffs = [abs(b[s][1] - loss) for s, loss in zip(resumed["steps"], resumed["loss"])]
    return {
        "first_step": resumed["steps"][0],
        "steps": len(same),
        "hashes_matched": sum(same),
        "first_mismatch": next((s for s, ok in zip(resumed["steps"], same) if not ok), None),
        "max_abs_loss_diff": max(diffs),
        "losses_bitwise_equal": sum(d == 0.0 for d in diffs),
        "seconds": resumed["seconds"],
    }


def write_tables(out: Path, runs: dict, exp: Any) -> None:
    k = exp.checkpoint_step
    with open(out / "hashes.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["loader", "world_size", "step", "global_batch_sha256", "base_sha256", "match"])
        for kind in KINDS:
            base = runs[(kind, "base", exp.base_world)]
            by_step = dict(zip(base["steps"], base["hash"]))
            for world in exp.worlds:
                r = runs[(kind, "resume", world)]
                for s, h in zip(r["steps"], r["hash"]):
                    w.writerow([kind, world, s, h, by_step[s], int(h == by_step[s])])
    lines = [
        f"# Global batch hashes after resuming at step {k}",
        "",
        f"Base: uninterrupted run on {exp.base_world} ranks. Each cell: does the resumed run's global batch",
        "at that step have the same SHA-256 as the base run's (✓) or not (✗). Zephon hashes cover every",
        "training array of every lane's microbatches; the standard loader's cover the global batch's rows",
        "as a set (sorted by row index), so only *which* rows were used counts, not their order.",
        "",
        "| step | Zephon base | "
        + " | ".join(f"Zephon {w} rank(s)" for w in exp.worlds)
        + " | standard base | "
        + " | ".join(f"standard {w} rank(s)" for w in exp.worlds)
        + " |",
        "|---:|---|" + "---|" * len(exp.worlds) + "---|" + "---|" * len(exp.worlds),
    ]
    bases = {
        kind: dict(zip(runs[(kind, "base", exp.base_world)]["steps"], runs[(kind, "base", exp.base_world)]["hash"]))
        for kind in KINDS
    }
    resumed = {
        (kind, w): dict(zip(runs[(kind, "resume", w)]["steps"], runs[(kind, "resume", w)]["hash"]))
        for kind in KINDS
        for w in exp.worlds
    }
    for s in range(k, exp.steps):
        cells = [str(s)]
        for kind in KINDS:
            cells.append(f"`{bases[kind][s][:12]}`")
            cells += ["✓" if resumed[(kind, w)].get(s) == bases[kind][s] else "✗" for w in exp.worlds]
        lines.append("| " + " | ".join(cells) + " |")
    (out / "hashes.md").write_text("\n".join(lines) + "\n")


def plot(out: Path, runs: dict, exp: Any) -> Path | None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no plot (pip install matplotlib)")
        return None
    k = exp.checkpoint_step
    colors = {1: "tab:orange", 2: "tab:green", 4: "tab:purple", 8: "tab:red"}
    window = max(1, min(10, (exp.steps - k) // 4))
    fig, axes = plt.subplots(2, 2, figsize=(10, 6.2), sharex=True, gridspec_kw={"height_ratios": [3, 2]})
    for col, kind in enumerate(KINDS):
        base = runs[(kind, "base", exp.base_world)]
        top, bottom = axes[0][col], axes[1][col]
        top.plot(base["steps"], base["loss"], color="black", lw=0.6, alpha=0.35)
        top.plot(
            base["steps"],
            moving_average(base["loss"], window),
            color="black",
            lw=1.6,
            label=f"uninterrupted, {exp.base_world} ranks",
        )
        b = dict(zip(base["steps"], base["loss"]))
        for w in exp.worlds:
            r = runs[(kind, "resume", w)]
            c = colors.get(w, None)
            top.plot(r["steps"], r["loss"], color=c, lw=0.6, alpha=0.35)
            # the resumed run's average continues the base run's window across the checkpoint
            joined = [b[s] for s in base["steps"] if s < r["steps"][0]] + r["loss"]
            top.plot(
                r["steps"],
                moving_average(joined, window)[-len(r["loss"]) :],
                color=c,
                lw=1.2,
                label=f"resumed on {w} rank(s)",
            )
            diffs = [max(abs(b[s] - loss), FLOOR) for s, loss in zip(r["steps"], r["loss"])]
            bottom.plot(r["steps"], diffs, color=c, lw=0.9, label=f"{w} rank(s)")
        for ax in (top, bottom):
            ax.axvline(k, color="grey", ls="--", lw=0.8)
        top.set_title(KINDS[kind], fontsize=11)
        top.set_ylabel(f"training loss per token\n(thin: per step; thick: {window}-step mean)")
        lo = min(min(r["loss"][len(r["loss"]) // 4 :]) for key, r in runs.items() if key[0] == kind)
        hi = max(max(r["loss"][len(r["loss"]) // 4 :]) for key, r in runs.items() if key[0] == kind)
        top.set_ylim(lo - 0.1 * (hi - lo), hi + 0.1 * (hi - lo))
        top.legend(fontsize=8, loc="upper right")
        bottom.set_yscale("log")
        bottom.set_ylim(FLOOR / 3, 10)
        bottom.set_ylabel(f"|loss - uninterrupted|\n(0 drawn at {FLOOR:g})")
        bottom.set_xlabel(f"global step (checkpoint at {k}, global batch {exp.global_batch} x {exp.seq_len} tokens)")
    fig.suptitle("Resuming a 2-rank run on 1, 2 and 4 ranks: same global batch, same seeds", fontsize=12)
    fig.tight_layout()
    path = out / "loss_curves.png"
    fig.savefig(path, dpi=80)
    plt.close(fig)
    shrink_png(path)
    return path


def moving_average(xs: list[float], window: int) -> list[float]:
    out, total = [], 0.0
    for i, x in enumerate(xs):
        total += x - (xs[i - window] if i >= window else 0.0)
        out.append(total / min(i + 1, window))
    return out


def shrink_png(path: Path) -> None:
    """Re-save with a 256-colour palette: a third of the size, so the committed figure stays small."""
    try:
        from PIL import Image
    except ImportError:
        return
    with Image.open(path) as im:
        small = im.convert("RGB").quantize(colors=256)
    small.save(path, optimize=True)


def write_report(exp: Any, out: Path, timings: dict[str, float]) -> dict[str, Any]:
    runs = load_runs(out, exp)
    k = exp.checkpoint_step
    verdict: dict[str, Any] = {}
    for kind in KINDS:
        base = runs[(kind, "base", exp.base_world)]
        verdict[kind] = {f"{w} rank(s)": compare(base, runs[(kind, "resume", w)], k) for w in exp.worlds}
    write_tables(out, runs, exp)
    png = plot(out, runs, exp)
    summary = {
        "config": {k_: (list(v) if isinstance(v, tuple) else v) for k_, v in vars(exp).items()},
        "timings_seconds": timings,
        "verdict": verdict,
        "plot": str(png) if png else None,
        "runs": {f"{kind}-{phase}-w{w}": r for (kind, phase, w), r in runs.items()},
    }
    (out / "results.json").write_text(json.dumps(summary, indent=1))
    return summary


if __name__ == "__main__":  # re-render the report of a finished run: python report.py OUT
    import sys
    from types import SimpleNamespace

    folder = Path(sys.argv[1])
    config = json.loads((folder / "results.json").read_text())["config"]
    config["worlds"] = tuple(config["worlds"])
    timings = json.loads((folder / "results.json").read_text())["timings_seconds"]
    print(json.dumps(write_report(SimpleNamespace(**config), folder, timings)["verdict"], indent=1))

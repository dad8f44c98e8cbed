"""Training curves from a run's metrics file (``metrics.jsonl``): loss, learning rate, validation AP, as one PNG;
drawn after every run and by ``python -m simplepose.engine.plot RUN_DIR``."""

from __future__ import annotations

from pathlib import Path

from simplepose.engine.logger import read_metrics
from simplepose.utils.errors import UserError
from simplepose.utils.io import atomic_path


def plot_run(run_dir: str | Path, out: str | Path | None = None) -> Path:
    """Draw training loss (per step and per epoch), learning rate and validation metrics; returns the PNG path."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    run_dir = Path(run_dir)
    if not (run_dir / "metrics.jsonl").is_file():
        raise UserError(f"{run_dir} holds no metrics.jsonl (is it a run folder, i.e. a train.out_dir?)")
    records = read_metrics(run_dir)
    steps = [r for r in records if r["kind"] == "train"]
    epochs = [r for r in records if r["kind"] == "epoch"]
    vals = [r for r in records if r["kind"] == "val"]
    fig, axes = plt.subplots(1, 3, figsize=(15, 4))
    ax = axes[0]
    ax.plot([r["global_step"] for r in steps], [r["loss"] for r in steps], lw=0.8, alpha=0.6, label="step")
    ax.plot([r["global_step"] for r in epochs], [r["train_loss"] for r in epochs], "o-", label="epoch mean")
    if any("val_loss" in r for r in vals):
        ax.plot(
            [r["global_step"] for r in vals if "val_loss" in r],
            [r["val_loss"] for r in vals if "val_loss" in r],
            "s-",
            label="validation",
        )
    ax.set(xlabel="step", ylabel="loss", yscale="log", title="loss")
    ax.legend()
    axes[1].plot([r["global_step"] for r in steps], [r["lr"] for r in steps])
    axes[1].set(xlabel="step", ylabel="learning rate", title="learning rate")
    ax = axes[2]
    for key in ("AP", "AP50", "AR"):
        pts = [(r["epoch"], r[key]) for r in vals if key in r]
        if pts:
            ax.plot(*zip(*pts), "o-", label=key)
    ax.set(xlabel="epoch", ylabel="COCO keypoints", title="validation", ylim=(0, 1))
    if vals:
        ax.legend()
    fig.tight_layout()
    out = Path(out) if out else run_dir / "curves.png"
    try:
        with atomic_path(out, suffix=f".tmp{out.suffix}") as tmp:
            fig.savefig(tmp, dpi=100, format=out.suffix.lstrip(".") or "png")
    finally:
        plt.close(fig)
    return out

"""A diagnosis (``diagnosis.Diagnosis``) as files people read: ``diagnosis.json`` and plots, and a printed summary.

    written = write_diagnosis(diagnosis, "diag/", coco=coco, images_dir="coco/val2017")
    print(summary_text(diagnosis))

``DIR/diagnosis.json`` holds every figure; ``errors_per_keypoint.png`` the share of each keypoint's error types,
``ap_gains.png`` the AP gained by correcting each error type in turn (and each alone), ``pr_curves.png`` the
precision-recall curves at OKS 0.5 and 0.75 before and after each correction, ``worst_examples.png`` (when the images
are given) the detections with the most keypoint errors on their images, each keypoint coloured by its class and
tied to its ground truth.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from simplepose.data.image_files import image_path, read_image
from simplepose.evaluate.metrics.diagnosis import CORRECTED, ERROR_TYPES, Diagnosis
from simplepose.utils.io import atomic_path, atomic_write_text

COLORS = {  # per error type (matplotlib colours)
    "good": "#3a9d5d",
    "jitter": "#8c4646",
    "inversion": "#d96459",
    "swap": "#f2ae72",
    "miss": "#e8d36b",
}
STAGE_LABELS = {
    "baseline": "as found",
    "+miss": "w/o miss",
    "+swap": "w/o swap",
    "+inversion": "w/o inversion",
    "+jitter": "w/o jitter",
    "+score": "optimal scores",
    "+background": "w/o background FP",
    "+false_negatives": "w/o false negatives",
}


def write_diagnosis(diagnosis: Diagnosis, out_dir: str | Path, coco=None, images_dir: str | Path | None = None):
    """Write ``diagnosis.json`` and the plots into ``out_dir`` (made if needed; every file atomically); the worst
    examples only with ``coco`` (the ground truth it was made on, for the file names) and ``images_dir``. Returns
    the paths written."""
    import matplotlib

    matplotlib.use("Agg")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    json_path = out / "diagnosis.json"
    atomic_write_text(json_path, json.dumps(diagnosis.to_dict(), indent=1) + "\n")
    written = [json_path]
    written.append(_save(_errors_per_keypoint(diagnosis), out / "errors_per_keypoint.png"))
    written.append(_save(_ap_gains(diagnosis), out / "ap_gains.png"))
    written.append(_save(_pr_curves(diagnosis), out / "pr_curves.png"))
    if coco is not None and images_dir is not None and diagnosis.worst:
        written.append(_save(_worst_examples(diagnosis, coco, Path(images_dir)), out / "worst_examples.png"))
    return written


def summary_text(d: Diagnosis) -> str:
    """A few lines for the terminal: the keypoint errors, the AP steps, the background errors."""
    total = max(sum(d.keypoint_errors.values()), 1)
    kinds = ", ".join(f"{k} {v} ({v / total:.1%})" for k, v in d.keypoint_errors.items())
    steps = "  ".join(f"{STAGE_LABELS[k]} {v:.3f}" for k, v in d.ap.items())
    b = d.background
    return (
        f"keypoints of matched detections: {kinds}\n"
        f"AP, correcting in turn: {steps}\n"
        f"AP correcting one type alone: " + ", ".join(f"{k} {v:.3f}" for k, v in d.ap_alone.items()) + "\n"
        f"background: {b['detections_matching_no_person']} of {d.detections} detections match no person, "
        f"{b['people_no_detection_reaches']} of {d.people} people no detection reaches\n"
        f"people lost at OKS 0.5: "
        + ", ".join(f"{c} {n} (AP {d.lost_ap_cost.get(c, 0.0):+.3f} without them)" for c, n in d.lost_people.items())
        + "\n"
    )


def _save(fig, path: Path) -> Path:
    import matplotlib.pyplot as plt

    with atomic_path(path, suffix=".tmp.png") as tmp:
        fig.savefig(tmp, dpi=110, bbox_inches="tight", format="png")
    plt.close(fig)
    return path


def _errors_per_keypoint(d: Diagnosis):
    import matplotlib.pyplot as plt

    names = list(d.keypoint_names)
    counts = np.array([[d.per_keypoint[n][t] for t in ERROR_TYPES] for n in names], np.float64)
    shares = counts / np.maximum(counts.sum(1, keepdims=True), 1)
    fig, ax = plt.subplots(figsize=(max(8.0, 0.45 * len(names) + 2), 4.5))
    bottom = np.zeros(len(names))
    for i, kind in enumerate(ERROR_TYPES):
        ax.bar(range(len(names)), shares[:, i], bottom=bottom, color=COLORS[kind], label=kind)
        bottom += shares[:, i]
    ax.set_xticks(range(len(names)), names, rotation=60, ha="right", fontsize=8)
    ax.set(
        ylabel="share of the labelled keypoints",
        ylim=(0, 1),
        title=f"keypoint errors of matched detections ({int(counts.sum())} keypoints)",
    )
    ax.legend(ncol=5, loc="lower center", bbox_to_anchor=(0.5, 1.08), frameon=False)
    return fig


def _ap_gains(d: Diagnosis):
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(12, 4))
    gains = d.ap_gains
    labels = list(gains)
    others = {"score": "#4f82bd", "background": "#8063a3", "false_negatives": "seagreen"}
    colors = [COLORS.get(k, others.get(k)) for k in labels]
    ax = axes[0]
    ax.bar(range(len(labels)), [gains[k] for k in labels], color=colors)
    ax.set_xticks(range(len(labels)), labels, rotation=30, ha="right")
    ax.set(ylabel="AP gained", title=f"correcting in turn (AP as found {d.ap['baseline']:.3f})")
    for i, k in enumerate(labels):
        ax.text(i, gains[k], f"{gains[k]:+.3f}", ha="center", va="bottom", fontsize=8)
    ax = axes[1]
    alone = [d.ap_alone[k] - d.ap["baseline"] for k in CORRECTED]
    ax.bar(range(len(CORRECTED)), alone, color=[COLORS[k] for k in CORRECTED])
    ax.set_xticks(range(len(CORRECTED)), CORRECTED)
    ax.set(ylabel="AP gained", title="each keypoint error type corrected alone")
    for i, v in enumerate(alone):
        ax.text(i, v, f"{v:+.3f}", ha="center", va="bottom", fontsize=8)
    return fig


def _pr_curves(d: Diagnosis):
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(d.pr_curves), figsize=(6 * len(d.pr_curves), 4.8), squeeze=False)
    cmap = plt.get_cmap("viridis")
    for ax, (name, curves) in zip(axes[0], d.pr_curves.items()):
        recall = np.asarray(curves["recall"])
        stages = [k for k in curves if k != "recall"]
        for i, stage in enumerate(stages):
            p = np.asarray(curves[stage], np.float64)
            p = np.where(p < 0, np.nan, p)
            area = np.nanmean(p) if np.isfinite(p).any() else 0.0
            ax.plot(recall, p, color=cmap(i / max(len(stages) - 1, 1)), label=f"{STAGE_LABELS[stage]} [{area:.3f}]")
        ax.set(
            xlabel="recall",
            ylabel="precision",
            xlim=(0, 1),
            ylim=(0, 1.02),
            title=f"precision-recall at OKS {name.split('_')[1]}",
        )
        ax.legend(fontsize=7, loc="lower left")
    return fig


def _worst_examples(d: Diagnosis, coco, images_dir: Path):
    import matplotlib.pyplot as plt

    shown = d.worst
    cols = min(4, len(shown))
    rows = (len(shown) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(3.6 * cols, 3.9 * rows), squeeze=False)
    for ax in axes.ravel():
        ax.axis("off")
    for ax, example in zip(axes.ravel(), shown):
        info = coco.imgs[example["image_id"]]
        image = read_image(image_path(images_dir, info, "the annotation file"))[..., ::-1]
        x, y, w, h = example["person_box"]
        pad = 0.25 * max(w, h, 16)
        x0, y0 = int(max(x - pad, 0)), int(max(y - pad, 0))
        x1, y1 = int(min(x + w + pad, image.shape[1])), int(min(y + h + pad, image.shape[0]))
        ax.imshow(image[y0:y1, x0:x1], extent=(x0, x1, y1, y0))
        det = np.asarray(example["keypoints"], np.float64).reshape(-1, 3)
        truth = np.asarray(example["ground_truth"], np.float64).reshape(-1, 3)
        for k, kind in enumerate(example["classes"]):
            if kind is None:
                continue
            if det[k, 2] > 0:  # found: the detection's keypoint, tied to its ground truth
                ax.plot([truth[k, 0], det[k, 0]], [truth[k, 1], det[k, 1]], color="white", lw=0.6, alpha=0.7)
                ax.scatter(truth[k, 0], truth[k, 1], s=10, c="white", edgecolors="black", linewidths=0.4)
                ax.scatter(det[k, 0], det[k, 1], s=22, c=COLORS[kind], edgecolors="black", linewidths=0.4)
            else:  # not found: a ring of the class's colour around the ground truth
                ax.scatter(truth[k, 0], truth[k, 1], s=40, facecolors="none", edgecolors=COLORS[kind], linewidths=1.2)
        ax.set_xlim(x0, x1)
        ax.set_ylim(y1, y0)
        ax.set_title(
            f"image {example['image_id']}: {example['errors']} errors, score {example['score']:.2f}", fontsize=8
        )
    handles = [plt.Line2D([], [], ls="", marker="o", color=COLORS[k], label=k) for k in ERROR_TYPES]
    handles.append(plt.Line2D([], [], ls="", marker="o", color="white", markeredgecolor="black", label="ground truth"))
    fig.legend(handles=handles, ncol=6, loc="lower center", bbox_to_anchor=(0.5, 1.0), frameon=False)
    fig.suptitle(
        "the detections with the most keypoint errors: each keypoint joined to its ground truth, a ring "
        "where it was not found",
        y=1.06,
        fontsize=10,
    )
    fig.tight_layout()
    return fig

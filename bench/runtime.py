"""The runtime without PyTorch against the PyTorch path on the CPU: install size, and images/s at 1 scale + flip and
5 scales + flip (docs/benchmarks.md#runtime-without-pytorch).

    python -m bench.runtime --ckpt runs/quickstart/best.pt --images cache/synthetic/images --count 3 --rounds 3

Install size: the files of the installed distributions each install needs (their RECORD), in this environment:
PyTorch's install is the main distribution's dependencies, the runtime's what runtime/backend.py derives (one level of
dependencies each, then theirs, read from the metadata). Speed: the checkpoint exported to ONNX (in a temporary
folder), then three estimators on the first ``--count`` .jpg images of ``--images``: ``PoseEstimator`` with the
PyTorch network (float32, BatchNorm folded), ``PoseEstimator.from_onnx`` and the runtime's ``OnnxPoseEstimator``,
each with the checkpoint's ``eval`` settings at the scale set in float32, on ``--threads`` threads (1: work per
core, as the other CPU figures; 0: each library's default), run in turns (A B C A B C ...) for ``--rounds`` rounds
after an untimed pass; the median images/s over the rounds and the median of the per-round ratios to the PyTorch
network. Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import importlib.util
import re
import statistics
import tempfile
from importlib import metadata
from pathlib import Path

import cv2
import torch
from packaging.requirements import Requirement

from simplepose.evaluate.estimator import PoseEstimator
from simplepose.evaluate.inference.checkpoint_model import load_model
from simplepose.evaluate.inference.onnx_export import export_metadata, export_onnx
from simplepose.evaluate.inference.onnx_runner import OnnxSource
from simplepose.evaluate.inference.onnx_session import CPU_PROVIDER, OnnxNetwork, import_onnxruntime
from simplepose.evaluate.onnx_estimator import OnnxPoseEstimator
from simplepose.utils.errors import UserError, cli_main
from tests.paths import REPO_ROOT

CPU = torch.device("cpu")
SCALE_SETS = {"1 scale + flip": [1.0], "5 scales + flip": [0.5, 1.0, 1.5, 2.0, 3.0]}


def requirement_names(requirements: list[str]) -> list[str]:
    """The distribution names of requirement strings whose markers hold here (extras' requirements left out)."""
    wanted = [Requirement(r) for r in requirements]
    return [r.name for r in wanted if r.marker is None or r.marker.evaluate({"extra": ""})]


def installed_size(names: list[str]) -> tuple[float, list[str]]:
    """(MB of the files of ``names`` and every distribution they require, installed here; those not installed)."""
    seen, missing, total, todo = set(), [], 0, list(names)
    while todo:
        name = todo.pop().lower().replace("_", "-")
        if name in seen:
            continue
        seen.add(name)
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            missing.append(name)
            continue
        total += sum(f.size or 0 for f in dist.files or [])
        todo.extend(requirement_names(dist.requires or []))
    return total / 1e6, missing


def project_requirements(pyproject: Path) -> list[str]:
    text = pyproject.read_text(encoding="utf-8")
    block = text.split("dependencies = [", 1)[1].split("]", 1)[0]
    return re.findall(r'"([^"]+)"', block)


def runtime_requirements() -> list[str]:
    """The runtime distribution's requirements, as its build backend derives them (runtime/backend.py)."""
    spec = importlib.util.spec_from_file_location("runtime_backend", REPO_ROOT / "runtime" / "backend.py")
    assert spec is not None and spec.loader is not None
    backend = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(backend)
    return backend.dependencies()


def sizes() -> list[str]:
    lines = []
    for name, requirements in (
        ("PyTorch path", project_requirements(REPO_ROOT / "pyproject.toml")),
        ("runtime", runtime_requirements()),
    ):
        mb, missing = installed_size(requirement_names(requirements))
        extra = " + onnxruntime (the onnx extra)" if name == "PyTorch path" else ""
        if name == "PyTorch path":
            mb += installed_size(["onnxruntime"])[0]
        gone = f" (not installed here: {', '.join(missing)})" if missing else ""
        lines.append(f"install size, {name}: {mb:.0f} MB of installed files{extra}{gone}")
    return lines


def session(path: Path, threads: int):
    """An ONNX Runtime CPU session of ``path`` on ``threads`` threads."""
    ort = import_onnxruntime()
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    return ort.InferenceSession(str(path), options, providers=[CPU_PROVIDER])


def measure(estimator, images) -> float:
    estimator(images)
    return estimator.timing.images_per_s


def main_rows(args) -> list[str]:
    files = sorted(Path(args.images).glob("*.jpg"))[: args.count]
    if len(files) < args.count:
        raise UserError(f"{args.images}: {len(files)} .jpg files, {args.count} needed (--count)", file=args.images)
    images = [cv2.imread(str(f), cv2.IMREAD_COLOR) for f in files]
    model, cfg = load_model(args.ckpt, None, None, CPU)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "model.onnx"
        size = max(64, cfg.eval.boxsize // 64 * 64)
        export_onnx(model, path, (size, size), metadata=export_metadata(cfg, model.skeleton))
        for setting, scales in SCALE_SETS.items():
            over = dict(scales=scales, flip=True, amp="off", channels_last="off")
            if args.boxsize:
                over["boxsize"] = args.boxsize
            runtime = OnnxPoseEstimator.from_onnx(path, **over)
            network = runtime.network
            if args.threads:  # the same thread count for ONNX Runtime's sessions as for PyTorch
                network = OnnxNetwork(session(path, args.threads), network.metadata, network.skeleton)
            estimators = {
                "PyTorch network": PoseEstimator.from_checkpoint(args.ckpt, device="cpu", **over),
                "PoseEstimator.from_onnx": PoseEstimator(
                    OnnxSource(network.session, network.metadata, network.skeleton), runtime.cfg, network.skeleton, CPU
                ),
                "runtime (OnnxPoseEstimator)": OnnxPoseEstimator(network, runtime.cfg),
            }
            for estimator in estimators.values():
                estimator(images)  # untimed pass
            rates: dict[str, list[float]] = {name: [] for name in estimators}
            for _ in range(args.rounds):
                for name, estimator in estimators.items():
                    rates[name].append(measure(estimator, images))
            base = rates["PyTorch network"]
            for name, got in rates.items():
                ratio = statistics.median(g / b for g, b in zip(got, base))
                spread = f"{statistics.median(got):.2f} ({min(got):.2f}-{max(got):.2f})"
                rows.append(f"| {setting} | {name} | {spread} | {ratio:.2f} |")
    return rows


@cli_main
def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.runtime", description=__doc__.split("\n\n")[0])
    p.add_argument("--ckpt", required=True, help="checkpoint to export and run")
    p.add_argument("--images", required=True, help="folder of .jpg images")
    p.add_argument("--count", type=int, default=3, help="images per round")
    p.add_argument("--rounds", type=int, default=3, help="rounds of the three estimators in turn")
    p.add_argument("--boxsize", type=int, default=0, help="eval.boxsize (rows of scale 1); 0: the checkpoint's")
    p.add_argument("--threads", type=int, default=1, help="threads of PyTorch and ONNX Runtime; 0: their defaults")
    args = p.parse_args(argv)
    if args.count < 1 or args.rounds < 1 or args.boxsize < 0 or args.threads < 0:
        raise UserError(
            "--count and --rounds must be >= 1, --boxsize and --threads >= 0; got "
            f"{args.count}, {args.rounds}, {args.boxsize}, {args.threads}"
        )
    if args.threads:
        torch.set_num_threads(args.threads)
    for line in sizes():
        print(line)
    print("| setting | path | images/s, median (range) | against the PyTorch network |")
    print("|---|---|---:|---:|")
    for row in main_rows(args):
        print(row)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Draw one training sample as a panel picture: image with keypoints, keypoint maps, limb maps, masks, scales.

    simplepose show-sample --h5 coco_train512.h5 --index 0 --out sample.png [--train] [--epoch E]
        [--config FILE] [key=value ...]

Without ``--train`` the sample is the identity augmentation (centred and scaled main person). Without a config
the input size and the skeleton are the ones the file was built for.
"""

from __future__ import annotations

import argparse
import sys

import cv2
import numpy as np

from simplepose.codec.layout import ChannelLayout
from simplepose.config.config_file import add_config_arguments, config_from_args
from simplepose.config.skeleton import Skeleton
from simplepose.config.skeleton_definition import skeleton_from_dict
from simplepose.data.dataset import SimplePoseDataset, read_settings
from simplepose.utils.commands import command, commands_here
from simplepose.utils.errors import UserError, cli_main
from simplepose.utils.io import atomic_write_bytes


def _upscale(m: np.ndarray, hw: tuple[int, int]) -> np.ndarray:
    return cv2.resize(m, (hw[1], hw[0]), interpolation=cv2.INTER_NEAREST)


def _overlay(image: np.ndarray, heat: np.ndarray, colour_map: int = cv2.COLORMAP_JET) -> np.ndarray:
    """Blend a [0, 1] map (any resolution) over the image."""
    heat = _upscale(heat.astype(np.float32), image.shape[:2])
    coloured = cv2.applyColorMap((np.clip(heat, 0, 1) * 255).astype(np.uint8), colour_map)
    alpha = np.clip(heat, 0, 1)[..., None] * 0.7
    return (image * (1 - alpha) + coloured * alpha).astype(np.uint8)


def _limb_colours(limbs: np.ndarray, image: np.ndarray, skeleton: Skeleton) -> np.ndarray:
    """Each limb map in its own colour (``skeleton.colors_bgr``), max over limbs, over the image."""
    strongest = limbs.argmax(0)
    value = limbs.max(0)
    colours = np.array(skeleton.colors_bgr, np.float32)[strongest]
    colours = np.stack([_upscale(colours[..., c], image.shape[:2]) for c in range(3)], -1)
    alpha = _upscale(value, image.shape[:2])[..., None] * 0.8
    return (image * (1 - alpha) + colours * alpha).astype(np.uint8)


def _label(img: np.ndarray, text: str) -> np.ndarray:
    img = img.copy()
    cv2.rectangle(img, (0, 0), (img.shape[1], 18), (0, 0, 0), -1)
    cv2.putText(img, text, (4, 13), cv2.FONT_HERSHEY_SIMPLEX, 0.42, (255, 255, 255), 1, cv2.LINE_AA)
    return img


def _draw_people(image: np.ndarray, keypoints: np.ndarray, skeleton: Skeleton) -> np.ndarray:
    """(P, K, 3) internal keypoints drawn with the skeleton's sample limbs; right side red, left blue, others green."""
    img = image.copy()
    for person in keypoints:
        for k in skeleton.draw_limbs:
            a, b = skeleton.limbs[k]
            if person[a, 2] < 2 and person[b, 2] < 2:
                pa, pb = (tuple(int(round(v)) for v in person[i, :2]) for i in (a, b))
                cv2.line(img, pa, pb, skeleton.colors_bgr[k], 2, cv2.LINE_AA)
        for j, (x, y, v) in enumerate(person):
            if v < 2:
                name = skeleton.keypoints[j]
                side = name.split("_")[0]
                colour = {"right": (0, 0, 255), "left": (255, 0, 0)}.get(side, (0, 255, 0))
                cv2.circle(img, (int(round(x)), int(round(y))), 3, colour, -1, cv2.LINE_AA)
    return img


def render(ds: SimplePoseDataset, index: int) -> np.ndarray:
    """The panel picture (BGR uint8) of sample ``index``."""
    params = ds.sample_params(index)
    item = ds.build(index, params)
    _, keypoints = ds.place(index, params)
    image = np.ascontiguousarray(item["image"].permute(1, 2, 0).numpy())  # (H, W, 3) BGR uint8
    targets = item["targets"][0].numpy()
    ignore = 1 - item["masks"][0].numpy()[0]
    sk = ds.skeleton
    layout = ChannelLayout.of(sk)
    person = targets[layout.person_mask]
    masks = image.copy()
    for m, tint_bgr in ((person, (0, 128, 0)), (ignore, (0, 0, 150))):
        sel = _upscale(m, image.shape[:2]) > 0.5
        masks[sel] = (masks[sel] * 0.5 + tint_bgr).astype(np.uint8)
    title = f"image {ds.file_image_id[ds.sample_image[index]]} flip={params.flip} rot={params.degree:.0f}"
    top = [
        _label(_draw_people(image, keypoints, sk), title),
        _label(_overlay(image, targets[layout.max_keypoint]), f"keypoint maps (channel {layout.max_keypoint})"),
        _label(_limb_colours(targets[layout.limbs], image, sk), f"limb maps (0-{sk.num_limbs - 1})"),
        _label(masks, f"ignored (red), person mask ch {layout.person_mask} (green)"),
    ]
    scales = []
    for k, t in enumerate(item["targets"]):
        t = t.numpy()
        both = np.maximum(t[layout.max_keypoint], t[layout.limbs].max(0) * 0.5)
        scales.append(_label(_overlay(image, both), f"scale {k}: {t.shape[-1]}x{t.shape[-2]}"))
    rows = [np.hstack(top)]
    width = rows[0].shape[1]
    strip = np.hstack(scales)
    strip = cv2.resize(strip, (width, int(strip.shape[0] * width / strip.shape[1])), interpolation=cv2.INTER_AREA)
    rows.append(strip)
    return np.vstack(rows)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=command("data.show_sample"), description=commands_here(__doc__.split("\n\n")[0]))
    p.add_argument("--h5", required=True, help=f"HDF5 file made by {command('data.coco_to_hdf5')}")
    p.add_argument("--index", type=int, default=0, help="sample index")
    p.add_argument("--out", required=True, help="PNG file to write")
    p.add_argument("--train", action="store_true", help="random training augmentation instead of the identity")
    p.add_argument("--epoch", type=int, default=0, help="epoch whose augmentation draw to show (with --train)")
    add_config_arguments(p)
    return p


@cli_main
def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    settings = read_settings(args.h5)
    if not args.config and not any(o.startswith("data.input_size=") for o in args.overrides):
        args.overrides = [*args.overrides, f"data.input_size={settings['input_size']}"]
    cfg = config_from_args(args)
    skeleton = None  # the file's own, unless a config or data.skeleton=... names one
    if not args.config and not any(o.startswith("data.skeleton=") for o in args.overrides) and settings.get("skeleton"):
        skeleton = skeleton_from_dict(settings["skeleton"], f"stored in {args.h5}")
    ds = SimplePoseDataset(args.h5, cfg, train=args.train, skeleton=skeleton)
    if not 0 <= args.index < len(ds):
        raise UserError(f"--index {args.index} is out of range: {args.h5} has {len(ds)} samples")
    ds.set_epoch(args.epoch)
    ok, png = cv2.imencode(".png", render(ds, args.index))
    if not ok:
        raise UserError(f"could not encode the picture for {args.out}")
    atomic_write_bytes(args.out, png.tobytes())
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""A synthetic COCO-format keypoint dataset that a small network learns in minutes on a CPU: ``generate`` (what
``python -m simplepose.data.synthetic`` runs: ``generate(out, num_images, seed, val_fraction, skeleton)``), and the
pictures' people.

Each picture (256-384 px) has 1-4 large articulated people (bbox height mostly 35-80% of the picture) drawn as
filled body shapes over a random background (gradient, noise or stripes), plus tiny people without keypoints
(``num_keypoints = 0``) and sometimes a crowd (``iscrowd = 1``, RLE). Every person faces the camera, so the
person's right side is on the picture's left relative to the body axis (head up), as for a frontal COCO person:
that is the left/right cue, and unlike a colour code per side it survives the horizontal-flip augmentation
(flipping a frontal person gives a frontal person). Limb colours are symmetric per limb type (upper arm,
forearm, thigh, shin), the face has eyes, nose and ears, and joints carry a dark dot.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import cv2
import numpy as np
from pycocotools import mask as mask_utils

from simplepose.config.skeleton import Skeleton
from simplepose.config.skeleton_file import load_skeleton
from simplepose.data.synthetic_figures import Figure
from simplepose.utils.errors import UserError
from simplepose.utils.io import atomic_write_text

COCO = load_skeleton("coco")  # the people drawn without --skeleton are COCO persons
K = {name: i for i, name in enumerate(COCO.dataset_keypoints)}
NUM_KEYPOINTS = COCO.num_dataset_keypoints
# (from, to, colour BGR, thickness as a fraction of the body height); symmetric between sides.
_LIMB_SHAPES = [
    ("shoulder", "elbow", (40, 40, 200), 0.055),  # upper arm: red
    ("elbow", "wrist", (40, 170, 230), 0.045),  # forearm: orange
    ("hip", "knee", (170, 60, 30), 0.075),  # thigh: blue
    ("knee", "ankle", (60, 170, 60), 0.06),  # shin: green
]
_SKIN = (150, 180, 225)
CROWD_PROBABILITY = 0.15  # of a picture holding a crowd region (iscrowd = 1)


def _rot(angle_deg: float) -> np.ndarray:
    a = math.radians(angle_deg)
    return np.array([[math.cos(a), -math.sin(a)], [math.sin(a), math.cos(a)]])


def random_pose(rng: np.random.Generator) -> np.ndarray:
    """17 COCO keypoints (x, y) of a frontal person of height 1 (head top to ankles), neck at the origin, y down.

    The person's right side is at negative x (the viewer's left)."""
    p = np.zeros((NUM_KEYPOINTS, 2))
    p[K["nose"]] = (0, -0.11)
    for side, sx in (("right", -1), ("left", 1)):
        p[K[f"{side}_eye"]] = (sx * 0.028, -0.135)
        p[K[f"{side}_ear"]] = (sx * 0.062, -0.12)
        sh = np.array([sx * 0.11, 0.02])
        hip = np.array([sx * 0.075, 0.33])
        p[K[f"{side}_shoulder"]] = sh
        p[K[f"{side}_hip"]] = hip
        up = rng.uniform(-15, 130)  # arm raised outwards, degrees from hanging down
        bend = rng.uniform(-20, 110)
        d1 = _rot(-sx * up) @ np.array([0, 1.0])
        d2 = _rot(-sx * (up + bend)) @ np.array([0, 1.0])
        p[K[f"{side}_elbow"]] = sh + 0.16 * d1
        p[K[f"{side}_wrist"]] = sh + 0.16 * d1 + 0.15 * d2
        spread = rng.uniform(-3, 35)
        knee = rng.uniform(-5, 50)
        d1 = _rot(-sx * spread) @ np.array([0, 1.0])
        d2 = _rot(-sx * (spread - knee)) @ np.array([0, 1.0])
        p[K[f"{side}_knee"]] = hip + 0.24 * d1
        p[K[f"{side}_ankle"]] = hip + 0.24 * d1 + 0.23 * d2
    return p


def random_background(rng: np.random.Generator, h: int, w: int) -> np.ndarray:
    kind = rng.integers(3)
    c0, c1 = rng.integers(0, 256, 3), rng.integers(0, 256, 3)
    if kind == 0:  # linear gradient in a random direction
        a = rng.uniform(0, 2 * math.pi)
        yy, xx = np.mgrid[0:h, 0:w]
        t = (xx * math.cos(a) + yy * math.sin(a)) / (h + w) + 0.5
        img = c0 * (1 - t[..., None]) + c1 * t[..., None]
    elif kind == 1:  # smooth noise
        small = rng.integers(0, 256, (rng.integers(3, 9), rng.integers(3, 9), 3)).astype(np.uint8)
        img = cv2.resize(small, (w, h), interpolation=cv2.INTER_CUBIC).astype(np.float64)
    else:  # stripes
        period = rng.integers(8, 40)
        yy, xx = np.mgrid[0:h, 0:w]
        a = rng.uniform(0, math.pi)
        on = ((xx * math.cos(a) + yy * math.sin(a)) // period) % 2
        img = np.where(on[..., None] > 0, c0, c1).astype(np.float64)
    img += rng.normal(0, 6, (h, w, 3))
    return np.clip(img, 0, 255).astype(np.uint8)


def _draw_person(img: np.ndarray, mask: np.ndarray, kp: np.ndarray, height: float, rng: np.random.Generator) -> None:
    """Draw a person given its image keypoints (17, 2) and body height in pixels; mark its pixels in ``mask``."""
    shade = rng.uniform(0.7, 1.15)
    torso_colour = tuple(int(c) for c in rng.integers(60, 230, 3))

    def pt(name):
        return tuple(int(round(v)) for v in kp[K[name]])

    def thick(frac):
        return max(1, int(round(frac * height)))

    torso = np.array([pt("right_shoulder"), pt("left_shoulder"), pt("left_hip"), pt("right_hip")], np.int32)
    for target, colour in ((img, torso_colour), (mask, 255)):
        cv2.fillConvexPoly(target, torso, colour, cv2.LINE_AA if target is img else cv2.LINE_8)
        cv2.line(target, pt("right_shoulder"), pt("left_shoulder"), colour, thick(0.05), cv2.LINE_AA)
    for a, b, colour, t in _LIMB_SHAPES:
        c = tuple(int(min(255, v * shade)) for v in colour)
        for side in ("right", "left"):
            cv2.line(img, pt(f"{side}_{a}"), pt(f"{side}_{b}"), c, thick(t), cv2.LINE_AA)
            cv2.line(mask, pt(f"{side}_{a}"), pt(f"{side}_{b}"), 255, thick(t))
    neck = (kp[K["right_shoulder"]] + kp[K["left_shoulder"]]) / 2
    head = kp[K["nose"]] + (kp[K["nose"]] - neck) * 0.15
    centre = tuple(int(round(v)) for v in head)
    cv2.line(img, tuple(int(round(v)) for v in neck), centre, _SKIN, thick(0.04), cv2.LINE_AA)
    cv2.line(mask, tuple(int(round(v)) for v in neck), centre, 255, thick(0.04))
    cv2.circle(img, centre, thick(0.075), _SKIN, -1, cv2.LINE_AA)
    cv2.circle(mask, centre, thick(0.075), 255, -1)
    dot = max(1, thick(0.012))
    for name in ("right_ear", "left_ear"):
        cv2.circle(img, pt(name), dot + 1, (60, 100, 160), -1, cv2.LINE_AA)
    for name in ("right_eye", "left_eye"):
        cv2.circle(img, pt(name), dot, (30, 30, 30), -1, cv2.LINE_AA)
    cv2.circle(img, pt("nose"), dot, (40, 40, 140), -1, cv2.LINE_AA)
    for side in ("right", "left"):
        for j in ("elbow", "wrist", "knee", "ankle", "shoulder", "hip"):
            cv2.circle(img, pt(f"{side}_{j}"), dot + 1, (25, 25, 25), -1, cv2.LINE_AA)


def _polygons(mask: np.ndarray) -> list[list[float]]:
    contours, _ = cv2.findContours(mask, cv2.RETR_EXTERNAL, cv2.CHAIN_APPROX_SIMPLE)
    return [c.reshape(-1).astype(float).tolist() for c in contours if len(c) >= 3]


class CocoPerson:
    """The COCO person (``random_pose``, ``_draw_person``); ``data.synthetic_figures.Figure`` is the same kind of
    thing for any skeleton."""

    num_keypoints = NUM_KEYPOINTS

    def pose(self, rng: np.random.Generator) -> np.ndarray:
        return random_pose(rng)

    def draw(self, img: np.ndarray, mask: np.ndarray, kp: np.ndarray, size: float, rng: np.random.Generator) -> None:
        _draw_person(img, mask, kp, size, rng)


Body = CocoPerson | Figure
COCO_PERSON = CocoPerson()


def body_for(skeleton: Skeleton | None) -> Body:
    """What the people of ``skeleton`` are drawn as: the COCO person for COCO's keypoints, else a ``Figure``."""
    if skeleton is None or skeleton.same_layout(COCO):
        return COCO_PERSON
    return Figure(skeleton)


def make_image(
    rng: np.random.Generator,
    image_id: int,
    first_ann_id: int,
    body: Body = COCO_PERSON,
    crowd_probability: float = CROWD_PROBABILITY,
) -> tuple[np.ndarray, list[dict]]:
    """One picture (h, w, 3) uint8 BGR and its COCO annotations, ids from ``first_ann_id`` on; a crowd region
    with probability ``crowd_probability``."""
    h, w = (int(v) for v in rng.integers(256, 385, 2))
    img = random_background(rng, h, w)
    people = [_draw_main_person(rng, img, body) for _ in range(int(rng.choice([1, 1, 2, 2, 3, 4])))]
    tiny = [_draw_tiny_person(rng, img, body) for _ in range(int(rng.integers(0, 4)))]
    crowd = _draw_crowd(rng, img, body) if rng.random() < crowd_probability else None
    anns = _image_annotations(people, tiny, crowd, body.num_keypoints)
    for ann_id, a in enumerate(anns, start=first_ann_id):
        a["image_id"] = image_id
        a["id"] = ann_id
    return img, anns


def _draw_main_person(rng: np.random.Generator, img: np.ndarray, body: Body) -> tuple[np.ndarray, np.ndarray]:
    """Draw a large person (height 35-80% of the picture, tilted up to 25 degrees) mostly inside ``img``.

    Returns its image keypoints (D, 2) and its mask (h, w) uint8 {0, 255}."""
    h, w = img.shape[:2]
    height = rng.uniform(0.35, 0.8) * h
    kp = body.pose(rng) * height
    kp = kp @ _rot(rng.uniform(-25, 25)).T
    lo, hi = kp.min(0), kp.max(0)
    low = np.array([-lo[0] - 0.1 * w, -lo[1]])
    kp += rng.uniform(low, np.maximum(low, [w - hi[0] + 0.1 * w, h - hi[1] + 0.05 * h]))  # wider than the picture
    mask = np.zeros((h, w), np.uint8)
    body.draw(img, mask, kp, height, rng)
    return kp, mask


def _draw_tiny_person(rng: np.random.Generator, img: np.ndarray, body: Body) -> np.ndarray:
    """Draw a tiny person (height 4-10% of the picture, annotated without keypoints); returns its mask (h, w)."""
    h, w = img.shape[:2]
    height = rng.uniform(0.04, 0.1) * h
    kp = body.pose(rng) * height + rng.uniform([0, 0], [w, h])
    mask = np.zeros((h, w), np.uint8)
    body.draw(img, mask, kp, height, rng)
    return mask


def _draw_crowd(rng: np.random.Generator, img: np.ndarray, body: Body) -> np.ndarray:
    """Draw 5-11 small people packed in one region of ``img``; returns their union mask (h, w) uint8 {0, 255}."""
    h, w = img.shape[:2]
    crowd = np.zeros((h, w), np.uint8)
    x0, y0 = rng.uniform(0, w * 0.7), rng.uniform(0, h * 0.7)
    for _ in range(int(rng.integers(5, 12))):
        height = rng.uniform(0.05, 0.1) * h
        kp = body.pose(rng) * height + (x0 + rng.uniform(0, w * 0.3), y0 + rng.uniform(0, h * 0.3))
        body.draw(img, crowd, kp, height, rng)
    return crowd


def covered_by_later(masks: list[np.ndarray]) -> list[np.ndarray]:
    """For each mask (in drawing order), the bool (h, w) region drawn over it by the masks after it."""
    later = np.zeros(masks[0].shape, bool)
    cover = []
    for mask in reversed(masks):
        cover.append(later.copy())
        later |= mask > 0
    return cover[::-1]


def _image_annotations(
    people: list[tuple[np.ndarray, np.ndarray]], tiny: list[np.ndarray], crowd: np.ndarray | None, num_keypoints: int
) -> list[dict]:
    """COCO annotations (without ids) of the people, the tiny people and the crowd, in drawing order.

    Later people occlude earlier ones: a person's visible region excludes everything drawn after it, and its
    keypoints under a later person are marked occluded. People left with no visible pixels get no annotation.
    """
    drawn = [m for _, m in people] + tiny + ([crowd] if crowd is not None else [])
    h, w = drawn[0].shape
    cover = covered_by_later(drawn)
    anns = []
    for i, (kp, mask) in enumerate(people + [(None, m) for m in tiny]):
        ann = person_annotation(kp, (mask > 0) & ~cover[i], cover[i], h, w, num_keypoints)
        if ann is not None:
            anns.append(ann)
    if crowd is not None and crowd.any():
        anns.append(_crowd_annotation(crowd, num_keypoints))
    return anns


def _crowd_annotation(crowd: np.ndarray, num_keypoints: int) -> dict:
    """The ``iscrowd = 1`` annotation of a crowd mask (h, w), its region as an RLE."""
    h, w = crowd.shape
    rle = mask_utils.encode(np.asfortranarray(crowd > 0))
    x, y, bw, bh = mask_utils.toBbox(rle).tolist()
    return {
        "segmentation": {"size": [h, w], "counts": rle["counts"].decode("ascii")},
        "num_keypoints": 0,
        "area": float(mask_utils.area(rle)),
        "iscrowd": 1,
        "keypoints": [0] * (3 * num_keypoints),
        "bbox": [x, y, bw, bh],
        "category_id": 1,
    }


def uncompressed_rle(rle: dict) -> dict:
    """The same region as COCO's own files write crowds: ``counts`` a list of run lengths (column-major, starting
    with background), not pycocotools' compressed string."""
    flat = mask_utils.decode(rle).ravel(order="F")
    edges = np.flatnonzero(np.diff(flat)) + 1
    runs = np.diff(np.concatenate([[0], edges, [flat.size]])).tolist()
    return {"size": list(rle["size"]), "counts": ([0] if flat[0] else []) + runs}


def person_annotation(kp, visible: np.ndarray, covered: np.ndarray, h: int, w: int, num_keypoints: int) -> dict | None:
    polys = _polygons(visible.astype(np.uint8))
    if not polys:
        return None
    ys, xs = np.nonzero(visible)
    keypoints: list[float] = [0] * (3 * num_keypoints)
    num = 0
    if kp is not None:
        for j, (x, y) in enumerate(kp):
            if 0 <= x < w and 0 <= y < h:
                v = 1 if covered[int(y), int(x)] else 2
                keypoints[3 * j : 3 * j + 3] = [round(float(x), 2), round(float(y), 2), v]
                num += 1
        labelled = np.array([keypoints[3 * j : 3 * j + 2] for j in range(num_keypoints) if keypoints[3 * j + 2] > 0])
        if len(labelled):
            xs = np.concatenate([xs, labelled[:, 0]])
            ys = np.concatenate([ys, labelled[:, 1]])
    x0, y0, x1, y1 = float(xs.min()), float(ys.min()), float(xs.max()) + 1, float(ys.max()) + 1
    return {
        "segmentation": polys,
        "num_keypoints": num,
        "area": float(visible.sum()),
        "iscrowd": 0,
        "keypoints": keypoints,
        "bbox": [x0, y0, min(x1, w) - x0, min(y1, h) - y0],
        "category_id": 1,
    }


def categories(skeleton: Skeleton = COCO) -> list[dict]:
    """The one keypoint category (id 1): COCO's person, or one named after ``skeleton``; its "skeleton" is the
    skeleton's result edges, 1-based."""
    name = "person" if skeleton.same_layout(COCO) else skeleton.name
    return [
        {
            "supercategory": name,
            "id": 1,
            "name": name,
            "keypoints": list(skeleton.dataset_keypoints),
            "skeleton": [[a + 1, b + 1] for a, b in skeleton.draw_edges],
        }
    ]


def crowd_index(anns: list[dict]) -> float:
    """CrowdPose's Crowd Index of an image (Li et al. 2019, eq. 1): over the people with keypoints, the mean of
    (labelled keypoints of other people inside the person's box) / (the person's own labelled keypoints); 0 to
    about 1, rounded to 0.01 as CrowdPose's files give it."""
    people = [np.asarray(a["keypoints"], float).reshape(-1, 3) for a in anns if a["num_keypoints"] > 0]
    boxes = [a["bbox"] for a in anns if a["num_keypoints"] > 0]
    ratios = []
    for i, ((x, y, bw, bh), own) in enumerate(zip(boxes, people)):
        others = np.concatenate([p[p[:, 2] > 0, :2] for j, p in enumerate(people) if j != i] or [np.zeros((0, 2))])
        inside = (others[:, 0] >= x) & (others[:, 0] <= x + bw) & (others[:, 1] >= y) & (others[:, 1] <= y + bh)
        ratios.append(inside.sum() / max(int((own[:, 2] > 0).sum()), 1))
    return round(float(np.mean(ratios)), 2) if ratios else 0.0


def generate(
    out: str | Path,
    num_images: int = 600,
    seed: int = 0,
    val_fraction: float = 0.2,
    skeleton: Skeleton | None = None,
    crowd_probability: float = CROWD_PROBABILITY,
    crowd_counts: str = "compressed",
) -> dict[str, int]:
    """Write the dataset of ``skeleton``'s figures (default: COCO persons) under ``out``; returns the number of
    images per split. ``crowd_probability``: of a picture holding a crowd region (drawn last: the people of every
    picture are the same for any value, occluded where a crowd covers them); ``crowd_counts``: a crowd's RLE as
    pycocotools' compressed string (``"compressed"``) or, as in COCO's own files, a list of run lengths
    (``"uncompressed"``)."""
    if num_images < 1 or not 0 <= val_fraction < 1:
        raise UserError("--num-images must be >= 1 and --val-fraction in [0, 1)")
    if not 0 <= crowd_probability <= 1 or crowd_counts not in ("compressed", "uncompressed"):
        raise UserError("crowd_probability must be in [0, 1] and crowd_counts 'compressed' or 'uncompressed'")
    body = body_for(skeleton)
    skeleton = skeleton or COCO
    out = Path(out)
    (out / "images").mkdir(parents=True, exist_ok=True)
    (out / "annotations").mkdir(parents=True, exist_ok=True)
    num_val = int(round(num_images * val_fraction))
    splits: dict[str, dict[str, list[dict]]] = {s: {"images": [], "annotations": []} for s in ("train", "val")}
    ann_id = 1
    for i in range(num_images):
        rng = np.random.default_rng([seed, i])
        image_id = i + 1
        img, anns = make_image(rng, image_id, ann_id, body, crowd_probability)
        if crowd_counts == "uncompressed":
            for a in anns:
                if a["iscrowd"]:
                    a["segmentation"] = uncompressed_rle(a["segmentation"])
        ann_id += len(anns)
        name = f"{image_id:012d}.jpg"
        ok, buf = cv2.imencode(".jpg", img, [cv2.IMWRITE_JPEG_QUALITY, 92])
        assert ok
        (out / "images" / name).write_bytes(buf.tobytes())  # the JSON files, written last, are atomic
        split = splits["val" if i >= num_images - num_val else "train"]
        entry = {"id": image_id, "file_name": name, "width": img.shape[1], "height": img.shape[0]}
        if skeleton.scored_as_crowdpose:
            entry["crowdIndex"] = crowd_index(anns)
        split["images"].append(entry)
        split["annotations"] += anns
    what = "people" if body is COCO_PERSON else f"'{skeleton.name}' figures"
    info = {"description": f"SimplePose synthetic {what}, seed {seed}", "version": "1"}
    for name, split in splits.items():
        data = {"info": info, "licenses": [], **split, "categories": categories(skeleton)}
        atomic_write_text(out / "annotations" / f"person_keypoints_{name}.json", json.dumps(data))
    return {k: len(v["images"]) for k, v in splits.items()}

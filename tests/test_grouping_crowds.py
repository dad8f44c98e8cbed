"""Synthetic crowds decoded from their oracle maps (the ground truth's own targets, 3 scales + flip) into the right
people: same-type keypoints of two people a few pixels apart, crossing arms, a person split in two by an occluder,
and maps rounded to 16 bits. The original's decoder (``limb_order``) is the reference that the default must match
or beat on each scene."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
from scipy.optimize import linear_sum_assignment

from simplepose.codec.decoder.assemble import assemble_strongest_first
from simplepose.codec.decoder.decode import decode_people
from simplepose.codec.decoder.peaks import local_maxima
from simplepose.codec.person import keypoint_array
from simplepose.config.schema import DecodeSettings, EvalConfig, TargetConfig
from simplepose.evaluate.inference.multiscale import multiscale_maps
from simplepose.evaluate.metrics.diagnosis import diagnose
from simplepose.evaluate.metrics.oks import oks_matrix
from tests.helpers import COCO, keypoints_oracle, person

CPU = "cpu"
UNLABELLED = 2  # internal visibility code of a keypoint the annotation does not give
TOLERANCE = 4.0  # image pixels between a decoded keypoint and its ground truth
CLOSEST = 7.0  # keypoints of one type this close (image pixels) are not told apart by ``assignment``
MIN_OKS = 0.9  # each person decoded matches its own at least this well


def oracle_maps(kp: np.ndarray, image_hw: tuple[int, int], cfg: EvalConfig):
    """(maps, scale) of the internal keypoints ``kp`` (P, 18, 3) drawn as targets, through the test-time path."""
    import torch

    image = np.zeros((*image_hw, 3), np.uint8)
    return multiscale_maps(image, cfg, keypoints_oracle(kp, TargetConfig(), COCO), torch.device(CPU), skeleton=COCO)


def decoded(kp: np.ndarray, image_hw=(480, 640), maps_dtype=np.float32, **eval_overrides) -> np.ndarray:
    """The people decoded from the oracle maps of ``kp`` at the default eval settings but 3 scales (and the
    overrides), as (P, 17, 3) keypoints, 0 where not found; ``maps_dtype``: the averaged maps rounded to this type
    first (as a bf16 or fp16 network's)."""
    cfg = dataclasses.replace(EvalConfig(scales=[0.5, 1.0, 2.0]), **eval_overrides)
    maps, scale = oracle_maps(kp, image_hw, cfg)
    maps = maps.astype(maps_dtype).astype(np.float32)
    people = decode_people(maps, cfg, scale, skeleton=COCO)
    return np.nan_to_num(keypoint_array(people, COCO.num_dataset_keypoints))


def dataset_truth(kp: np.ndarray) -> np.ndarray:
    """(P, 17, 3) dataset-order ground truth of internal keypoints: x, y, labelled (1) or not (0)."""
    inverse = [COCO.keypoints.index(name) for name in COCO.dataset_keypoints]
    out = kp[:, inverse].copy()
    out[..., 2] = (kp[:, inverse, 2] != UNLABELLED).astype(float)
    return out


def assignment(people: np.ndarray, truth: np.ndarray) -> list[set[int]]:
    """For each person of two or more keypoints, the ground-truth people its keypoints lie on (within
    ``TOLERANCE``; a keypoint on nobody gives -1, one within ``CLOSEST`` of two people's counts for neither)."""
    out = []
    for det in people:
        found = det[:, 2] > 0
        if found.sum() < 2:
            continue
        owners = set()
        for k in np.flatnonzero(found):
            d = np.hypot(truth[:, k, 0] - det[k, 0], truth[:, k, 1] - det[k, 1])
            d[truth[:, k, 2] == 0] = np.inf
            if d.min() > TOLERANCE:
                owners.add(-1)
            elif (d <= TOLERANCE + CLOSEST).sum() == 1:
                owners.add(int(d.argmin()))
        out.append(owners)
    return out


def assert_right_people(people: np.ndarray, kp: np.ndarray, min_oks: float = MIN_OKS) -> None:
    """The decoded people of two or more keypoints are the ground-truth people: as many, each matched one-to-one at an
    OKS of at least ``min_oks`` and holding all the labelled keypoints of its match."""
    truth = dataset_truth(kp)
    dets = people[(people[..., 2] > 0).sum(1) >= 2]
    assert len(dets) == len(kp), f"{len(dets)} people decoded for {len(kp)}: {assignment(people, truth)}"
    labelled, found = truth[..., 2] > 0, dets[..., 2] > 0
    xy = truth[..., :2]
    area = np.array([np.prod(p[m].max(0) - p[m].min(0)) for p, m in zip(xy, labelled)])
    oks, _ = oks_matrix(xy, labelled, dets[..., :2], found, COCO.sigmas, area[:, None], over="a")
    rows, cols = linear_sum_assignment(-oks)
    assert oks[rows, cols].min() >= min_oks, (oks[rows, cols], assignment(people, truth))
    for p, d in zip(rows, cols):
        assert found[d][labelled[p]].all(), f"person {p} misses keypoints"


def crossing_arms() -> np.ndarray:
    """Two people side by side, each reaching across the other: the right wrists 6 px apart, the forearms crossing."""
    a, b = person(250, 100), person(330, 100)
    rw, re = COCO.keypoints.index("right_wrist"), COCO.keypoints.index("right_elbow")
    a[rw, :2] = (300, 190)  # a's right hand reaches to b's side
    b[rw, :2] = (305, 194)  # b's right hand beside it
    a[re, :2] = (260, 170)
    b[re, :2] = (290, 150)
    return np.stack([a, b])


def close_row(n: int = 5, step: float = 34.0) -> np.ndarray:
    """``n`` people in a row, ``step`` px apart: each one's wrists a few pixels from the next one's other wrist, their
    elbows and shoulders overlapping."""
    return np.stack([person(150 + i * step, 120 + 6 * (i % 2)) for i in range(n)])


def split_by_occluder() -> np.ndarray:
    """Two people; the first's hips hidden (unlabelled), so that no limb joins its legs to its upper body."""
    kp = np.stack([person(260, 90), person(420, 120)])
    for name in ("right_hip", "left_hip"):
        kp[0, COCO.keypoints.index(name), 2] = UNLABELLED
    return kp


def only(kp: np.ndarray, names: tuple[str, ...]) -> np.ndarray:
    """A copy of one person's internal keypoints ``kp`` (18, 3) with every keypoint but ``names`` unlabelled."""
    out = kp.copy()
    out[[n not in names for n in COCO.keypoints], 2] = UNLABELLED
    return out


UPPER = ("nose", "neck", "right_shoulder", "right_elbow", "right_wrist", "left_shoulder", "left_elbow", "left_wrist",
         "right_eye", "left_eye", "right_ear", "left_ear")  # fmt: skip
LEGS = ("right_hip", "right_knee", "right_ankle", "left_hip", "left_knee", "left_ankle")


def partial_people() -> np.ndarray:
    """A whole person, and beside it two partial people whose labelled parts do not overlap: an upper body (its legs
    cut off or hidden) and, a hand's width to its side, another person's hips and legs (their upper body hidden). No
    keypoint type stops the two partial people joining; the maps draw no limb between them."""
    whole = person(130, 100)
    upper = only(person(300, 100), UPPER)
    legs = only(person(362, 64), LEGS)
    return np.stack([whole, upper, legs])


def head_beside_hips() -> np.ndarray:
    """Two partial people side by side: one's head and shoulders, the other's hips alone, below and to the side of where
    the first one's hips would be (the merge of the issue's COCO photo: one person's head and shoulders take another
    person's two hips)."""
    head = only(person(300, 100), ("nose", "neck", "right_shoulder", "left_shoulder", "right_eye", "left_eye"))
    hips = only(person(350, 90, right_hip=(322, 178), left_hip=(360, 200)), ("right_hip", "left_hip"))
    return np.stack([person(120, 100), head, hips])


def shared_wrists() -> np.ndarray:
    """Two people whose left hands meet: the left wrists 2 px apart make one peak, each forearm's limb ending on it."""
    a = person(250, 100, left_wrist=(292, 215))
    b = person(360, 100, left_elbow=(345, 190), left_wrist=(294, 216))
    return np.stack([a, b])


MERGE_CASES = [partial_people, head_beside_hips]


@pytest.mark.parametrize("scene", [crossing_arms, close_row, split_by_occluder, *MERGE_CASES, shared_wrists])
def test_synthetic_crowds_decode_into_the_right_people(scene):
    kp = scene()
    assert_right_people(decoded(kp), kp)


def test_the_close_row_is_also_right_at_the_image_size():
    kp = close_row()
    assert_right_people(decoded(kp, decode_height=0), kp)


def test_a_person_split_by_an_occluder_stays_split_without_joining():
    """The occluded person's legs have no limb to its upper body (nor to each other): only ``join_fragments`` puts
    them back."""
    kp = split_by_occluder()
    owners = assignment(decoded(kp, join_fragments=0.0), dataset_truth(kp))
    assert sorted(owners, key=min) == [{0}, {0}, {0}, {1}]


def test_maps_rounded_to_16_bits_decode_into_the_same_people():
    """Rounding the maps as a bf16 network does makes plateaus at the top of peaks: one peak each, the same people."""
    kp = close_row()
    exact = decoded(kp)
    for dtype in (np.float16,):
        rounded = decoded(kp, maps_dtype=dtype)
        assert_right_people(rounded, kp)
        assert len(rounded) == len(exact)


def test_a_plateau_gives_one_peak_unless_the_original_is_asked_for():
    heat = np.zeros((1, 8, 8), np.float32)
    heat[0, 3, 3:5] = 0.8  # two tied pixels
    heat[0, 5:7, 5:7] = 0.6  # a 2 x 2 plateau
    heat[0, 0, 0] = 0.5  # at the border
    k, y, x = local_maxima(heat, 0.1)
    assert list(zip(y.tolist(), x.tolist())) == [(0, 0), (3, 3), (5, 5)]
    k, y, x = local_maxima(heat, 0.1, one_per_plateau=False)
    assert len(y) == 1 + 2 + 4


def test_strongest_connection_wins_a_contested_keypoint_whatever_the_limb_order():
    """Peaks 0 (type 0), 1 and 2 (type 1), 3 (type 2): 0-1 weakly and 0-2 strongly claim the type-1 slot of peak 0's
    person; the strong one wins, and 1 keeps its own link to 3, whichever limb comes first."""
    scores, parts = np.ones(4), np.array([0, 1, 1, 2])
    weak = np.array([[0, 1, 0.5, 10, 0.5]])
    strong = np.array([[0, 2, 0.9, 10, 0.9]])
    other = np.array([[1, 3, 0.7, 10, 0.7]])
    params = DecodeSettings(min_parts=2)
    for connections in ([weak, strong, other], [other, strong, weak]):
        slots, totals = assemble_strongest_first(connections, scores, parts, 3, params)
        people = sorted(map(tuple, slots.tolist()))
        assert people == [(-1, 1, 3), (0, 2, -1)]
        assert sorted(totals.tolist()) == pytest.approx([2.7, 2.9])


def test_fragments_join_the_nearest_person_they_complete():
    """Two upper bodies (types 0-1) and one pair of legs (types 2-3) with no connection to either: the legs join the
    upper body whose keypoints are nearest, within ``join_fragments`` times its size, and not beyond."""
    scores, parts = np.ones(6), np.array([0, 1, 0, 1, 2, 3])
    xy = np.array([[0, 0], [0, 20], [100, 0], [100, 20], [101, 28], [101, 60]], float)
    connections = [np.array([[0, 1, 1, 20, 1], [2, 3, 1, 20, 1]]), np.array([[4, 5, 1, 25, 1]])]
    joined, _ = assemble_strongest_first(connections, scores, parts, 4, DecodeSettings(join_fragments=0.75), xy)
    assert sorted(map(tuple, joined.tolist())) == [(0, 1, -1, -1), (2, 3, 4, 5)]
    apart, _ = assemble_strongest_first(connections, scores, parts, 4, DecodeSettings(join_fragments=0.2), xy)
    assert len(apart) == 3


@pytest.mark.parametrize("scene", MERGE_CASES)
def test_partial_people_join_as_before_only_when_asked(scene):
    """The former assembly (``eval.join_limbs=0 eval.share_peaks=0``) joins the two partial people into one detection,
    the default keeps each person once."""
    kp = scene()
    truth = dataset_truth(kp)
    assert any(len(owners - {-1}) > 1 for owners in assignment(decoded(kp, join_limbs=0.0, share_peaks=0.0), truth))
    assert all(len(owners - {-1}) == 1 for owners in assignment(decoded(kp), truth))


def test_a_peak_two_people_share_is_kept_by_both_unless_the_former_assembly_is_asked_for():
    kp = shared_wrists()
    wrist = COCO.dataset_keypoints.index("left_wrist")
    both = decoded(kp)
    assert (both[:, wrist, 2] > 0).sum() == 2
    assert (decoded(kp, share_peaks=0.0)[:, wrist, 2] > 0).sum() == 1


def scene_file(kp: np.ndarray, path, image_hw=(480, 640)):
    """A COCO keypoint annotation file of one image holding the people ``kp`` (internal keypoints), written to
    ``path``."""
    truth = dataset_truth(kp)
    annotations = []
    for i, t in enumerate(truth):
        xy = t[t[:, 2] > 0, :2]
        x0, y0 = xy.min(0) - 4
        w, h = xy.max(0) - xy.min(0) + 8
        flat = np.column_stack([t[:, :2] * t[:, 2:], 2 * t[:, 2]]).ravel().tolist()
        annotations.append(dict(id=i + 1, image_id=1, category_id=1, iscrowd=0, keypoints=flat,
                                num_keypoints=int(t[:, 2].sum()), bbox=[x0, y0, w, h], area=float(w * h)))  # fmt: skip
    category = {"id": 1, "name": "person", "keypoints": list(COCO.dataset_keypoints), "skeleton": []}
    image = {"id": 1, "file_name": "scene.jpg", "height": image_hw[0], "width": image_hw[1]}
    path.write_text(json.dumps({"images": [image], "annotations": annotations, "categories": [category]}))
    return path


def results_of(people: np.ndarray) -> list[dict]:
    """COCO results of decoded people (P, 17, 3) of image 1, scored by their number of keypoints."""
    return [
        {"image_id": 1, "category_id": 1, "keypoints": p.ravel().tolist(), "score": float((p[:, 2] > 0).sum())}
        for p in people
        if (p[:, 2] > 0).sum() >= 2
    ]


@pytest.mark.parametrize("scene", MERGE_CASES)
def test_the_diagnosis_counts_people_lost_to_merges_and_misses(scene, tmp_path):
    """The former assembly's joined detection loses one of the two partial people as merged, at an AP cost; the default
    loses no one; a person whose detection is left out of the results is lost as missed."""
    kp = scene()
    truth = scene_file(kp, tmp_path / "scene.json")
    before = diagnose(truth, results_of(decoded(kp, join_limbs=0.0, share_peaks=0.0)))
    assert before.lost_people == {"merged": 1, "missed": 0}
    assert before.lost_ap_cost["merged"] > 0.1 and before.lost_ap_cost["missed"] == 0
    assert [p["cause"] for p in before.lost] == ["merged"] and before.lost[0]["best_oks"] >= 0.5
    now = results_of(decoded(kp))
    assert diagnose(truth, now).lost_people == {"merged": 0, "missed": 0}
    without_first = diagnose(truth, now[1:])
    assert without_first.lost_people == {"merged": 0, "missed": 1}
    assert without_first.lost_ap_cost["missed"] > 0.1
    assert without_first.ap["baseline"] + without_first.lost_ap_cost["missed"] == pytest.approx(1.0, abs=0.01)
    nothing = diagnose(truth, [])  # everyone missed: without them no one is left to score, nothing is wrong (1.0)
    assert nothing.lost_people == {"merged": 0, "missed": len(kp)} and nothing.lost_ap_cost["missed"] == 1.0


def test_join_person_keeps_apart_pieces_the_person_channel_separates():
    """An upper body and, beside it, someone's lone lower leg (no limb of the skeleton links their keypoint types, so
    the limb maps say nothing): ``join_fragments`` joins them by distance; with ``eval.join_person`` the person
    channel, background between their silhouettes, keeps them apart."""
    import torch

    from simplepose.evaluate.inference.oracle import OracleSource

    upper = person(200, 100)
    lower = {"right_hip", "right_knee", "right_ankle", "left_hip", "left_knee", "left_ankle"}
    upper[[COCO.keypoints.index(n) for n in lower], 2] = UNLABELLED
    leg = person(0, 0, right_knee=(300, 230), right_ankle=(300, 275))
    leg[[i for i, n in enumerate(COCO.keypoints) if n not in ("right_knee", "right_ankle")], 2] = UNLABELLED
    kp = np.stack([upper, leg])
    mask = np.zeros((480, 640), np.uint8)  # each silhouette the box of its keypoints, 12 px around
    for p in kp:
        x0, y0 = p[p[:, 2] < UNLABELLED, :2].min(0) - 12
        x1, y1 = p[p[:, 2] < UNLABELLED, :2].max(0) + 12
        mask[int(y0) : int(y1) + 1, int(x0) : int(x1) + 1] = 255
    source = OracleSource(lambda key: kp, TargetConfig(), COCO, mask_of=lambda key: mask)
    cfg = EvalConfig(scales=[1.0])
    maps, scale = multiscale_maps(np.zeros((480, 640, 3), np.uint8), cfg, source, torch.device(CPU), skeleton=COCO)

    def sizes(**overrides) -> list[int]:
        people = decode_people(maps, dataclasses.replace(cfg, **overrides), scale, skeleton=COCO)
        return sorted(int(np.isfinite(p.keypoints[:, 0]).sum()) for p in people)

    assert sizes() == [13]  # joined: one detection for two people (the upper body has 11 dataset keypoints)
    assert sizes(join_person=0.5) == [2, 11]
    assert sizes(join_person=0.0, join_fragments=0.0) == [2, 11]  # the distance test alone, for reference

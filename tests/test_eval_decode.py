"""Peaks, limb scoring and person assembly on hand-made maps with known people."""

import dataclasses

import numpy as np
import pytest

from simplepose.codec.decoder.assemble import assemble_people, person_scores
from simplepose.codec.decoder.decode import decode_people
from simplepose.codec.decoder.limbs import LimbPairs, match_limb, score_pairs
from simplepose.codec.decoder.peaks import find_peaks, local_maxima
from simplepose.codec.person import keypoint_array
from simplepose.codec.pose_codec import PoseCodec
from simplepose.codec.targets import draw_targets
from simplepose.config.config_file import config_from_dict, load_config, save_config, to_dict
from simplepose.config.schema import DecodeSettings, EvalConfig, TargetConfig
from simplepose.evaluate.metrics.coco_results import coco_results
from tests.helpers import COCO, COCO_LAYOUT, internal_to_dataset, person, score_array

STRIDE = 4


def gaussian_map(h: int, w: int, x: float, y: float, sigma: float = 2.25) -> np.ndarray:
    gy, gx = np.mgrid[0:h, 0:w]
    return np.exp(-((gx - x) ** 2 + (gy - y) ** 2) / (2 * sigma**2)).astype(np.float32)


def to_coco(kp: np.ndarray) -> np.ndarray:
    """(18, 3) internal -> (17, 2) COCO-order x, y (NaN where not visible)."""
    out = np.full((17, 2), np.nan)
    for i, c in enumerate(internal_to_dataset(COCO)):
        if c >= 0 and kp[i, 2] < 2:
            out[c] = kp[i, :2]
    return out


def decoder(**eval_overrides) -> EvalConfig:
    """The decoder's settings of ``eval.*`` with ``eval_overrides``."""
    return EvalConfig(**eval_overrides)


def decode_drawn(people: list[np.ndarray], grid_hw=(64, 80), **cfg_overrides):
    maps = draw_targets(np.stack(people), None, grid_hw, STRIDE, TargetConfig(), COCO)
    return decode_people(maps, decoder(**cfg_overrides), scale=STRIDE, skeleton=COCO)


def assert_found(decoded, truth: np.ndarray, tol: float = 1.0):
    """Exactly one decoded person matches ``truth`` (18, 3) keypoint for keypoint within ``tol`` pixels."""
    expected = to_coco(truth)
    errors = []
    for kp in keypoint_array(decoded, COCO.num_dataset_keypoints):
        found = kp[:, 2] > 0
        if not np.array_equal(found, ~np.isnan(expected[:, 0])):
            errors.append(np.inf)
            continue
        errors.append(np.abs(kp[found, :2] - expected[found]).max())
    assert min(errors) <= tol, f"best match error {min(errors):.2f} px"
    assert sum(e <= tol for e in errors) == 1


# ----------------------------------------------------------------------------------------------- peaks
def test_peak_subpixel_position_and_score():
    heat = gaussian_map(40, 50, x=20.3, y=11.7)[None]
    params = DecodeSettings(peak_threshold=0.1, refine_radius=2, peak_score="window_mean", refine_mode="quadratic")
    peaks, part = find_peaks(heat, params)
    assert len(peaks) == 1 and part[0] == 0
    assert peaks[0, 0] == pytest.approx(20.3, abs=0.01) and peaks[0, 1] == pytest.approx(11.7, abs=0.01)
    window = heat[0, 10:15, 18:23]
    assert peaks[0, 2] == pytest.approx(window.mean(), rel=1e-6)
    params = DecodeSettings(peak_threshold=0.1, refine_radius=2, peak_score="peak", refine_mode="centroid")
    peaks, _ = find_peaks(heat, params)
    assert peaks[0, 2] == pytest.approx(heat[0, 12, 20])
    # the centroid moves the right way along each axis (less far: the window pulls towards the centre)
    assert 20.0 < peaks[0, 0] < 20.3 and 11.7 < peaks[0, 1] < 12.0


def test_refine_xy_swap_bug_reproduces_the_original():
    heat = gaussian_map(40, 50, x=20.3, y=11.7)[None]
    original = DecodeSettings(peak_threshold=0.1, refine_radius=2, peak_score="window_mean", refine_mode="centroid")
    good, _ = find_peaks(heat, original)
    bad, _ = find_peaks(heat, dataclasses.replace(original, refine_xy_swap_bug=True))
    assert bad[0, 0] - 20 == pytest.approx(good[0, 1] - 12)
    assert bad[0, 1] - 12 == pytest.approx(good[0, 0] - 20)


def test_local_maxima_threshold_plateau_and_border():
    heat = np.zeros((2, 10, 10), np.float32)
    heat[0, 3, 3:5] = 0.8  # plateau: its first pixel is the peak (both, as the original, with one_per_plateau=False)
    heat[0, 7, 7] = 0.05  # below threshold
    heat[1, 0, 9] = 0.5  # corner peak
    k, y, x = local_maxima(heat, 0.1, one_per_plateau=False)
    assert list(zip(k, y, x)) == [(0, 3, 3), (0, 3, 4), (1, 0, 9)]
    k, y, x = local_maxima(heat, 0.1)
    assert list(zip(k, y, x)) == [(0, 3, 3), (1, 0, 9)]
    params = DecodeSettings(peak_threshold=0.1, refine_radius=2, peak_score="window_mean", refine_mode="quadratic")
    peaks, _ = find_peaks(heat, params)
    assert tuple(peaks[-1]) == (9.0, 0.0, 0.5)  # too close to the border: integer position, own value


@pytest.mark.parametrize("channels", [3, 140])  # 140: more than OpenCV filters at once (whole-body skeletons)
def test_local_maxima_are_a_3x3_maximum_filter_with_the_edge_replicated(channels):
    """The original's candidates (``one_per_plateau=False``) are exactly the pixels equal to their 3x3 maximum (edge
    replicated) and at least the threshold, on maps with ties (values rounded to 1/8) and channels-last memory (as the
    runtime lays the maps out); with ``one_per_plateau``, the subset strictly above their preceding neighbours."""
    from scipy.ndimage import maximum_filter

    rng = np.random.default_rng(0)
    hwc = np.round(rng.uniform(0, 1, (23, 31, channels)) * 8).astype(np.float32) / 8
    heat = hwc.transpose(2, 0, 1)  # a channels-first view of channels-last memory
    want = (heat == maximum_filter(heat, size=(1, 3, 3), mode="nearest")) & (heat >= 0.3)
    k, y, x = local_maxima(heat, 0.3, one_per_plateau=False)
    assert sorted(zip(k.tolist(), y.tolist(), x.tolist())) == sorted(zip(*[a.tolist() for a in np.nonzero(want)]))
    assert list(zip(k, y, x)) == sorted(zip(k, y, x))  # by channel, then row, then column
    k1, y1, x1 = local_maxima(heat, 0.3)
    padded = np.pad(heat, ((0, 0), (1, 1), (1, 1)), constant_values=-1)
    preceding = np.stack([padded[k1, y1 + dy, x1 + dx] for dy, dx in ((0, 0), (0, 1), (0, 2), (1, 0))])
    assert set(zip(k1, y1, x1)) <= set(zip(k, y, x)) and (heat[k1, y1, x1] > preceding).all()
    assert len(k1) < len(k)  # ties were there to break


# ----------------------------------------------------------------------------------------------- limbs
def test_limb_scoring_accepts_the_drawn_limb_only():
    kp = person(100, 20)[None]
    maps = draw_targets(kp, None, (64, 80), STRIDE, TargetConfig(), COCO)
    limb = COCO.limbs.index((COCO.keypoints.index("right_shoulder"), COCO.keypoints.index("right_elbow")))
    cell = lambda xy: (np.asarray(xy) + 0.5) / STRIDE - 0.5  # noqa: E731
    a = cell([kp[0, 2, :2]])
    b = cell([kp[0, 3, :2], kp[0, 7, :2]])  # the true elbow and the left wrist
    params = DecodeSettings(limb_threshold=0.1, connect_ratio=0.8, limb_samples=20)
    score, length, accepted = score_pairs(maps[limb], a, b, (STRIDE, STRIDE), 256, params)
    assert accepted.tolist() == [[True, False]]
    assert score[0, 0] > 0.8
    assert length[0, 0] == pytest.approx(np.hypot(10, 35), rel=1e-6)
    rows = match_limb(LimbPairs(score, length, accepted), np.ones(1), np.ones(2))
    assert rows[:, :2].tolist() == [[0, 0]]


def test_limb_length_prior_penalises_long_limbs():
    limb_map = np.ones((10, 100), np.float32)
    a, b = np.array([[0.0, 5.0]]), np.array([[99.0, 5.0]])
    params = DecodeSettings(limb_threshold=0.1, connect_ratio=0.8, limb_samples=20)
    score, _, _ = score_pairs(limb_map, a, b, (1.0, 1.0), 100.0, params)
    assert score[0, 0] == pytest.approx(1 + 0.5 * 100 / 99 - 1)


def test_match_limb_is_one_to_one_and_greedy():
    score = np.array([[0.9, 0.8], [0.85, 0.2]])
    accepted = np.ones((2, 2), bool)
    rows = match_limb(LimbPairs(score, np.ones((2, 2)), accepted), np.ones(2), np.ones(2))
    assert rows[:, :2].tolist() == [[0, 0], [1, 1]]


# ----------------------------------------------------------------------------------------------- assembly
def test_person_found_through_the_to_end_receives_the_from_end():
    # limb (0 -> 1) starts a person; limb (2 -> 1) reaches it through peak 1, its "to" end.
    limbs = ((0, 1), (2, 1))
    conns = [np.array([[0, 1, 0.9, 10.0]]), np.array([[2, 1, 0.9, 10.0]])]
    slots, totals = assemble_people(conns, limbs, np.ones(3), np.array([0, 1, 2]), 3, DecodeSettings(min_parts=2))
    assert slots.tolist() == [[0, 1, 2]]  # the original dropped peak 2 here
    assert totals[0] == pytest.approx(3 + 0.9 * 2)


def test_partial_people_merge_and_filters():
    limbs = ((0, 1), (2, 3), (1, 2))
    conns = [np.array([[0, 1, 0.9, 10.0]]), np.array([[2, 3, 0.9, 10.0]]), np.array([[1, 2, 0.8, 10.0]])]
    part = np.array([0, 1, 2, 3, 3])
    params = DecodeSettings(min_parts=2)
    slots, _ = assemble_people(conns, limbs, np.ones(5), part, 4, params)
    assert slots.tolist() == [[0, 1, 2, 3]]  # merged; the lone peak 4 is dropped
    slots, totals = assemble_people(conns, limbs, np.ones(5), part, 4, DecodeSettings(min_parts=1))
    assert slots.tolist() == [[0, 1, 2, 3], [-1, -1, -1, 4]] and totals[1] == 1.0
    slots, _ = assemble_people(conns, limbs, np.ones(5), part, 4, DecodeSettings(min_parts=5))
    assert len(slots) == 0
    weak = np.full(5, 0.1)
    slots, _ = assemble_people(conns, limbs, weak, part, 4, DecodeSettings(min_mean_score=0.9))
    assert len(slots) == 0


def test_person_scores_lie_in_0_1_in_the_original_order_with_one_keypoint_people_last():
    totals = np.array([0.0, 0.3, 0.9, 2.0, 30.0, 1e6, 0.0, 0.45, 2.0, 1e6])
    counts = np.array([2, 2, 2, 3, 17, 17, 1, 1, 1, 1])
    scores = person_scores(totals, counts)
    assert np.all((scores >= 0) & (scores < 1))
    several = counts >= 2
    assert scores[several].min() >= 0.5 > scores[~several].max()  # the weakest pair beats the strongest single
    for group in (several, ~several):  # within each group, the order of the original's 1 - 1 / total
        with np.errstate(divide="ignore"):
            original = 1 - 1 / totals[group]
        assert np.array_equal(np.argsort(scores[group], kind="stable"), np.argsort(original, kind="stable"))
    assert scores[4] == pytest.approx(0.5 + 0.5 * 30 / 31)


# ----------------------------------------------------------------------------------------------- decoding
def test_a_strong_lone_keypoint_ranks_after_a_weak_two_keypoint_person():
    h, w = 64, 80
    maps = np.zeros((COCO.num_channels, h, w), np.float32)
    kp = COCO_LAYOUT.keypoints.start
    shoulder, elbow = COCO.index("right_shoulder"), COCO.index("right_elbow")
    maps[kp + shoulder] = 0.35 * gaussian_map(h, w, 20, 20)
    maps[kp + elbow] = 0.35 * gaussian_map(h, w, 20, 35)
    maps[COCO.limbs.index((shoulder, elbow)), 18:38, 18:23] = 0.35  # the limb between them
    maps[kp + COCO.index("nose")] = 1.5 * gaussian_map(h, w, 60, 30)  # a network's peak can exceed 1
    people = decode_people(maps, decoder(peak_score="peak", min_parts=1), scale=STRIDE, skeleton=COCO)
    keypoints, scores = keypoint_array(people, COCO.num_dataset_keypoints), score_array(people)
    found = [int(n) for n in (keypoints[:, :, 2] > 0).sum(1)]
    assert sorted(found) == [1, 2]
    pair, lone = found.index(2), found.index(1)
    assert keypoints[lone, :, 2].max() == 1.0  # the 1.5 peak's score, clipped to the documented (0, 1]
    assert scores[pair] >= 0.5 > scores[lone]
    pair_total = keypoints[pair, :, 2].sum() + 0.35  # two keypoint scores and the limb's
    assert pair_total < 1.5  # the original ranks by total (1 - 1 / total): the lone 1.5 nose would come first
    assert [sum(v > 0 for v in r["keypoints"][2::3]) for r in coco_results([1], [people])] == [2, 1]


def test_decodes_two_people_whose_limbs_cross():
    # both left forearms cross between the two people
    a = person(100, 20, left_elbow=(150, 95), left_wrist=(215, 140))
    b = person(190, 20, left_elbow=(235, 90), left_wrist=(160, 145))
    decoded = decode_drawn([a, b], min_parts=2)
    assert len(decoded) == 2
    assert_found(decoded, a)
    assert_found(decoded, b)
    assert np.all(score_array(decoded) > 0)


def test_decodes_a_person_cut_by_the_image_border():
    # the right arm and the legs leave the 320 x 256 image: only the joints inside are annotated
    cut = person(290, 120)
    cut[(cut[:, 0] > 319) | (cut[:, 1] > 255), 2] = 2
    whole = person(80, 10)
    decoded = decode_drawn([whole, cut], min_parts=2)
    assert len(decoded) == 2
    assert_found(decoded, whole)
    assert_found(decoded, cut, tol=1.5)  # a shoulder 4 px from the border has a one-sided Gaussian


def test_empty_and_tiny_maps_give_no_people():
    assert len(decode_people(np.zeros((50, 30, 40), np.float32), DecodeSettings(), skeleton=COCO)) == 0
    assert len(decode_people(np.zeros((50, 1, 1), np.float32), DecodeSettings(), skeleton=COCO)) == 0
    with pytest.raises(ValueError):
        decode_people(np.zeros((20, 10, 10), np.float32), DecodeSettings(), skeleton=COCO)


def test_a_lone_keypoint_is_a_one_keypoint_person():
    # a person of whom only the left wrist is labelled: one peak in the whole image, no limb to score
    truth = np.zeros((18, 3))
    truth[:, 2] = 2
    wrist = COCO.keypoints.index("left_wrist")
    truth[wrist] = (150.0, 120.0, 1)
    decoded = decode_drawn([truth])
    assert len(decoded) == 1
    assert_found(decoded, truth)
    assert len(decode_drawn([truth], min_parts=2)) == 0


def test_flat_maps_are_capped_to_the_strongest_peaks():
    heat = np.ones((2, 30, 40), np.float32)
    heat[0, 5, 7] = 2.0
    params = DecodeSettings(peak_threshold=0.1, refine_radius=2, peak_score="peak", refine_mode="quadratic",
                            max_peaks=10, one_per_plateau=False)  # fmt: skip
    peaks, part = find_peaks(heat, params)
    assert np.bincount(part).tolist() == [10, 10]
    assert [7.0, 5.0, 2.0] in peaks[part == 0].tolist()
    # one peak per plateau: the flat channel's first pixel, the other's maximum and its plateau's first pixel
    peaks, part = find_peaks(heat, dataclasses.replace(params, one_per_plateau=True))
    assert peaks[:, :2].tolist() == [[0, 0], [7, 5], [0, 0]]
    assert len(decode_people(np.ones((50, 64, 64), np.float32), decoder(max_peaks=20), skeleton=COCO)) <= 20


def test_contested_keypoint_goes_to_the_stronger_link_with_remove_recon():
    # person A = peaks 0-1 (parts 0, 1), person B = peaks 2-3 (parts 2, 1)... joined by a limb of part 0 -> 2
    # whose ends sit in different people that share part 1: the weaker holder of the contested end loses it
    limbs = ((0, 1), (2, 1), (0, 2))
    conns = [np.array([[0, 1, 0.9, 10.0]]), np.array([[2, 3, 0.5, 10.0]]), np.array([[0, 2, 0.95, 10.0]])]
    part = np.array([0, 1, 2, 1])
    kept, _ = assemble_people(conns, limbs, np.ones(4), part, 3, DecodeSettings(remove_recon=False, min_parts=1))
    assert kept.tolist() == [[0, 1, -1], [-1, 3, 2]]
    removed, _ = assemble_people(conns, limbs, np.ones(4), part, 3, DecodeSettings(remove_recon=True, min_parts=1))
    assert removed.tolist() == [[0, 1, -1], [-1, 3, -1], [-1, -1, 2]]


def test_each_decoder_setting_is_a_flat_eval_key(tmp_path):
    """The decoder's settings are ``eval.*`` keys, unchanged: from the command line, from a saved config (such as the
    one inside a checkpoint) and in a preset, each reaches the decoder by its own name."""
    changed = {"peak_threshold": 0.3, "refine_radius": 1, "peak_score": "peak", "refine_mode": "centroid",
               "refine_xy_swap_bug": True, "max_peaks": 7, "limb_threshold": 0.2, "connect_ratio": 0.6,
               "limb_samples": 9, "len_rate": 4.0, "connection_tolerance": 0.5, "remove_recon": True, "min_parts": 3,
               "min_mean_score": 0.4, "boxsize": 256, "grouping": "limb_order", "join_fragments": 0.1,
               "one_per_plateau": False, "join_limbs": 0.2, "share_peaks": 0.3, "join_person": 0.4}  # fmt: skip
    assert set(changed) == {f.name for f in dataclasses.fields(DecodeSettings)}
    assert all(changed[k] != getattr(EvalConfig(), k) for k in changed)
    from_command_line = load_config(None, [f"eval.{k}={v}" for k, v in changed.items()])
    save_config(from_command_line, tmp_path / "config.yaml")
    for cfg in (from_command_line, config_from_dict(to_dict(from_command_line)), load_config(tmp_path / "config.yaml")):
        assert isinstance(cfg.eval, DecodeSettings)
        assert {k: getattr(cfg.eval, k) for k in changed} == changed
    maps = draw_targets(np.stack([person(60, 40), person(200, 50)]), None, (64, 80), STRIDE, TargetConfig(), COCO)
    got = PoseCodec(COCO, decoding=from_command_line.eval).decode(maps, STRIDE)
    want = decode_people(maps, DecodeSettings(**changed), STRIDE, skeleton=COCO)
    k = COCO.num_dataset_keypoints
    assert np.array_equal(keypoint_array(got, k), keypoint_array(want, k), equal_nan=True)
    assert np.array_equal(score_array(got), score_array(want))

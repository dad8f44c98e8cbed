"""Greedy person assembly from accepted limb connections, with the original's bugs fixed.

See docs/evaluation.md#person-assembly.

Fixes (docs/differences.md#person-assembly):
* a person found through the "to" end whose "from" slot is empty also receives the "from" keypoint
  (the original only ever attached the "to" end);
* the part-count filter is real (``min_parts``), and the merged person's longest limb includes both halves;
* no crash on impossible matches (a peak sits in at most one person, so at most two people match);
* one-keypoint people rank strictly after every person of two or more keypoints (``person_scores``).
"""

from __future__ import annotations

import numpy as np

from simplepose.codec.decoder.person_channel import PersonAlong
from simplepose.config.schema import DecodeSettings

EMPTY = -1
_WINDOW = 64  # connections given their first test at once (``_join_connections``)


class _PartialPeople:
    """Growing set of partial people. Slots hold peak ids; ``owner[peak]`` is the person holding a peak."""

    def __init__(self, num_peaks: int, num_parts: int):
        self.num_parts = num_parts
        self.slots: list[list[int]] = []
        self.links: list[list[float]] = []
        self.total: list[float] = []
        self.count: list[int] = []
        self.maxlen: list[float] = []
        self.alive: list[bool] = []
        self.owner = [EMPTY] * num_peaks

    def create(self, a: int, pa: int, b: int, pb: int, s: float, length: float, peak_score: list[float]) -> None:
        p = len(self.slots)
        slots = [EMPTY] * self.num_parts
        links = [0.0] * self.num_parts
        slots[a], slots[b] = pa, pb
        links[a], links[b] = s, s
        self.slots.append(slots)
        self.links.append(links)
        self.total.append(peak_score[pa] + peak_score[pb] + s)
        self.count.append(2)
        self.maxlen.append(length)
        self.alive.append(True)
        self.owner[pa] = self.owner[pb] = p

    def attach(self, p: int, part: int, peak: int, s: float, length: float, peak_score: list[float]) -> None:
        self.slots[p][part] = peak
        self.links[p][part] = s
        self.count[p] += 1
        self.total[p] += peak_score[peak] + s
        self.maxlen[p] = max(self.maxlen[p], length)
        self.owner[peak] = p

    def replace(self, p: int, part: int, peak: int, s: float, length: float, peak_score: list[float]) -> None:
        old = self.slots[p][part]
        self.total[p] += peak_score[peak] + s - peak_score[old] - self.links[p][part]
        self.owner[old] = EMPTY
        self.slots[p][part] = peak
        self.links[p][part] = s
        self.maxlen[p] = max(self.maxlen[p], length)
        self.owner[peak] = p

    def remove(self, p: int, part: int, peak_score: list[float]) -> None:
        peak = self.slots[p][part]
        self.total[p] -= peak_score[peak] + self.links[p][part]
        self.count[p] -= 1
        self.owner[peak] = EMPTY
        self.slots[p][part] = EMPTY
        self.links[p][part] = 0.0

    def merge(self, p1: int, p2: int, s: float, length: float) -> None:
        for part, peak in enumerate(self.slots[p2]):
            if peak != EMPTY:
                self.slots[p1][part] = peak
                self.links[p1][part] = self.links[p2][part]
                self.owner[peak] = p1
        self.total[p1] += self.total[p2] + s
        self.count[p1] += self.count[p2]
        self.maxlen[p1] = max(self.maxlen[p1], self.maxlen[p2], length)
        self.alive[p2] = False

    def min_link(self, p: int) -> float:
        return min(lk for lk, peak in zip(self.links[p], self.slots[p]) if peak != EMPTY)


def assemble_people(
    connections: list[np.ndarray],
    limbs: tuple[tuple[int, int], ...],
    peak_score: np.ndarray,
    peak_part: np.ndarray,
    num_parts: int,
    params: DecodeSettings,
) -> tuple[np.ndarray, np.ndarray]:
    """Group limb connections into people.

    Args:
        connections: per limb k, (M_k, 4) rows (peak id a, peak id b, limb score s, length L), in the
            order they were accepted; limbs are processed in ``limbs`` order.
        peak_score, peak_part: (N,) score and keypoint type of every peak id.
    Returns:
        slots (P, num_parts) int peak ids (-1 empty) and totals (P,) summed peak + link scores,
        after the ``min_parts`` / ``min_mean_score`` filters. With ``min_parts <= 1`` every peak left
        unassigned is returned as a one-keypoint person (it can only add recall at the bottom of the ranking).
    """
    scores = peak_score.tolist()
    people = _PartialPeople(len(scores), num_parts)
    owner = people.owner
    len_rate = params.len_rate
    for (a, b), conn in zip(limbs, connections):
        for pa_f, pb_f, s, length in conn.tolist():
            pa, pb = int(pa_f), int(pb_f)
            qa, qb = owner[pa], owner[pb]
            if qa == EMPTY and qb == EMPTY:
                people.create(a, pa, b, pb, s, length, scores)
            elif qa in (qb, EMPTY) or qb == EMPTY:
                _extend(people, qa if qa != EMPTY else qb, a, pa, b, pb, s, length, scores, len_rate)
            else:
                _two_people(people, min(qa, qb), max(qa, qb), a, pa, b, pb, s, length, scores, params)
    keep = [
        p
        for p in range(len(people.slots))
        if people.alive[p]
        and people.count[p] >= max(params.min_parts, 1)
        and people.total[p] / people.count[p] >= params.min_mean_score
    ]
    rows = [people.slots[p] for p in keep]
    totals = [people.total[p] for p in keep]
    if params.min_parts <= 1:
        # keypoints no accepted limb reached become one-keypoint people (ranked last: ``person_scores``)
        for peak in np.flatnonzero(np.asarray(people.owner) == EMPTY).tolist():
            if scores[peak] >= params.min_mean_score:
                row = [EMPTY] * num_parts
                row[int(peak_part[peak])] = peak
                rows.append(row)
                totals.append(scores[peak])
    return np.array(rows, np.int64).reshape(-1, num_parts), np.array(totals, np.float64)


def assemble_strongest_first(
    connections: list[np.ndarray],
    peak_score: np.ndarray,
    peak_part: np.ndarray,
    num_parts: int,
    params: DecodeSettings,
    peak_xy: np.ndarray | None = None,
    limbs: tuple[tuple[int, int], ...] = (),
    person: PersonAlong | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Group connections into people, strongest evidence first, whatever the limb (docs/evaluation.md#person-assembly).

    Every peak starts as a one-keypoint partial person. The connections of all limb types are visited in descending
    order of their margin (``limbs.candidate_pairs``: how clearly each beats the other pairs of its limb that share an
    end); a connection joins the two partial people holding its ends when they hold no keypoint type in common, it is
    shorter than ``len_rate`` times the longer one's longest limb (as the original asks) and the maps join them
    (``JoinEvidence``: enough of the skeleton's ``limbs`` between their keypoints accepted); otherwise it is dropped.
    A contested keypoint so goes to the strongest connection that claims it, two fragments of one person join through
    any connection between them, and the order of the skeleton's limbs plays no part.

    Args:
        connections: per limb, (M_k, 5) rows (peak id a, peak id b, limb score s, length L, margin): every accepted
            pair.
        peak_score, peak_part: (N,) score and keypoint type of every peak id.
        peak_xy: (N, 2) peak positions in image pixels, for ``join_fragments`` (None: fragments are not joined).
        limbs: the skeleton's limbs (type a, type b), for ``join_limbs`` (empty: no check).
        person: the person channel along segments between peaks, for ``join_person`` (None: no check).
    Returns:
        as ``assemble_people``: slots (P, num_parts) peak ids (-1 empty) and totals (P,) (peak scores plus the scores
        of the connections that joined them: one fewer than the keypoints), after the same filters.
    """
    rows = [c for c in connections if len(c)]
    scores = peak_score.tolist()
    n = len(scores)
    parts = peak_part.tolist()
    # each partial person: the peak ids it holds, a bit mask of its keypoint types, total, longest limb
    members: list[list[int]] = [[i] for i in range(n)]
    mask = [1 << p for p in parts]
    total = list(scores)
    maxlen = [0.0] * n
    owner = np.arange(n)
    table = np.concatenate(rows) if rows else np.zeros((0, 5))
    evidence = JoinEvidence(table, parts, limbs, num_parts, params.join_limbs)
    if person is not None and params.join_person > 0:
        evidence.person, evidence.person_floor = person, params.join_person
    if len(table):
        order = np.argsort(-table[:, 4], kind="stable")  # ties: limb order, then the pairs' a-major order
        _join_connections(table[order], members, mask, total, maxlen, owner, evidence, params.len_rate)
    if params.join_fragments > 0 and peak_xy is not None:
        _join_fragments(members, mask, total, owner, peak_xy, params.join_fragments, evidence)
    share = params.share_peaks
    shared = _shared_peaks(table, members, mask, owner, parts, evidence, share) if share > 0 else {}
    out_rows, totals = [], []
    lone: list[tuple[list[int], float]] = []
    for q in range(n):
        held = members[q]
        if not held:
            continue
        count = len(held)
        if total[q] / count < params.min_mean_score:
            continue
        row = [EMPTY] * num_parts
        for peak in held:
            row[parts[peak]] = peak
        for peak in shared.get(q, ()):
            row[parts[peak]] = peak
        if count >= max(params.min_parts, 2):
            out_rows.append(row)
            totals.append(total[q])
        elif count == 1 and params.min_parts <= 1:
            lone.append((row, total[q]))
    out_rows += [r for r, _ in lone]
    totals += [t for _, t in lone]
    return np.array(out_rows, np.int64).reshape(-1, num_parts), np.array(totals, np.float64)


def _join_connections(ranked, members, mask, total, maxlen, owner: np.ndarray, evidence, len_rate: float) -> None:
    """The main pass of ``assemble_strongest_first``: each connection of ``ranked`` ((M, 5) rows, in turn) joins the two
    partial people holding its ends where the tests pass (updating the partial people in place).

    In crowds most connections fail the first test (their ends already in one person, or in two people with a
    keypoint type in common), and one that fails it fails it for good (people only grow): so it is made with numpy
    on ``_WINDOW`` connections at a time, and only those that pass go through the rest one by one."""
    ends = ranked[:, :2].astype(np.int64)
    on_person = evidence.along(ends[:, 0], ends[:, 1])
    # the people's type masks as integers, where they fit in int64 (else every connection is tested one by one)
    masks = np.array(mask, np.int64) if len(mask) and max(mask).bit_length() < 63 else None
    for start in range(0, len(ranked), _WINDOW):
        window = np.arange(start, min(start + _WINDOW, len(ranked)))
        if on_person is not None:
            window = window[on_person[window]]
        if masks is not None:
            qa, qb = owner[ends[window, 0]], owner[ends[window, 1]]
            window = window[(qa != qb) & (masks[qa] & masks[qb] == 0)]
        for k in window.tolist():
            qa, qb = owner[ends[k]].tolist()
            if qa == qb or mask[qa] & mask[qb]:
                continue
            s, length = ranked[k, 2:4].tolist()
            longest = max(maxlen[qa], maxlen[qb])
            if longest > 0 and length >= len_rate * longest:
                continue
            if not evidence.joins(members[qa], members[qb], mask[qa], mask[qb]):
                continue
            if len(members[qa]) < len(members[qb]):
                qa, qb = qb, qa
            owner[members[qb]] = qa
            members[qa] += members[qb]
            members[qb] = []
            mask[qa] |= mask[qb]
            if masks is not None:
                masks[qa] = mask[qa]
            total[qa] += total[qb] + s
            maxlen[qa] = max(longest, length)


def _shared_peaks(table, members, mask, owner, parts, evidence: JoinEvidence, share: float) -> dict[int, list[int]]:
    """{partial person: the peaks of other people it holds too}. Two people's keypoints of one type that lie within a
    blob's width of each other make one peak, which the assembly gives to one of them; the other keeps its accepted
    connection to it. So a person of two or more keypoints that lacks a keypoint type takes another person's peak of
    that type when an accepted connection (``table`` rows) links one of its keypoints to it, scoring at least
    ``share`` times the strongest connection to that peak, and the maps join it to the rest of the person
    (``evidence``); strongest connection first, one peak per type."""
    if not len(table):
        return {}
    own = np.asarray(owner)
    ends = table[:, :2].astype(np.int64)
    strongest = np.zeros(len(own))
    np.maximum.at(strongest, ends.ravel(), np.repeat(table[:, 2], 2))
    # each accepted connection in both directions (a keypoint of the person, the peak it may take), kept where the
    # person has two or more keypoints, lacks the peak's type, and the connection is nearly the strongest to the peak
    mine, other = np.concatenate([ends, ends[:, ::-1]]).T
    s = np.concatenate([table[:, 2], table[:, 2]])
    held, part = own[mine], np.asarray(parts)[other]
    person_mask = np.asarray(mask, dtype=object)[held]
    size = np.fromiter(map(len, members), np.int64, len(members))[held]
    lacks = np.fromiter((not (m >> t) & 1 for m, t in zip(person_mask.tolist(), part.tolist())), bool, len(held))
    ok = (held != own[other]) & (size >= 2) & lacks & (s >= share * strongest[other])
    on_person = evidence.along(mine, other)
    keep = np.flatnonzero(ok if on_person is None else ok & on_person)
    out: dict[int, list[int]] = {}
    taken: dict[int, int] = {}  # person -> bit mask of the types it took
    for k in keep[np.argsort(-s[keep], kind="stable")].tolist():
        q, peak, bit = int(held[k]), int(other[k]), 1 << int(part[k])
        if taken.get(q, 0) & bit or not evidence.joins([peak], members[q], bit, mask[q]):
            continue
        out.setdefault(q, []).append(peak)
        taken[q] = taken.get(q, 0) | bit
    return out


class JoinEvidence:
    """Whether the limb maps join two partial people: of the skeleton's limbs between a keypoint of one and a keypoint
    of the other (the limbs the maps would draw if they were one person), at least the fraction ``required`` is among
    the accepted connections (``table``'s pairs: each passed the criterion a limb within one person passes).

    Two partial people between whose keypoint types the skeleton has no limb always join (nothing in the maps says
    either way); ``required`` 0 never checks.
    """

    def __init__(self, table: np.ndarray, parts: list[int], limbs: tuple[tuple[int, int], ...], types: int, required):
        self.required = float(required) if limbs else 0.0
        self.parts = parts
        ends = table[:, :2].astype(np.int64)
        self.n = len(parts)
        # every accepted pair as one integer a * n + b, both ways round
        keys = np.concatenate([ends @ (self.n, 1), ends @ (1, self.n)]) if self.required else ends[:0, 0]
        self.accepted = set(keys.tolist())
        # per keypoint type: the bit mask of the types a limb links it to
        self.linked = [0] * types
        for a, b in limbs:
            self.linked[a] |= 1 << b
            self.linked[b] |= 1 << a
        self.person: PersonAlong | None = None  # with ``person_floor``: ``eval.join_person``'s test (``along``)
        self.person_floor = 0.0

    def along(self, a: np.ndarray, b: np.ndarray) -> np.ndarray | None:
        """(M,) whether the person channel along each segment from peak ``a[i]`` to peak ``b[i]`` reaches
        ``person_floor`` on average (a join there does not cross background); None: no such test."""
        if self.person is None or not len(a):
            return None if self.person is None else np.zeros(0, bool)
        return self.person.mean(a, b) >= self.person_floor

    def joins(self, first: list[int], second: list[int], first_mask: int, second_mask: int) -> bool:
        """Whether the partial people holding the peak ids ``first`` and ``second`` (type masks given) may join."""
        if self.required <= 0:
            return True
        if len(first) > len(second):
            first, second, second_mask = second, first, first_mask
        parts, linked = self.parts, self.linked
        if not any(linked[parts[p]] & second_mask for p in first):
            return True
        peak_of = {parts[p]: p for p in second}
        accepted = refused = 0
        for p in first:
            reach = linked[parts[p]] & second_mask
            while reach:
                low = reach & -reach
                q = peak_of[low.bit_length() - 1]
                if p * self.n + q in self.accepted:
                    accepted += 1
                else:
                    refused += 1
                reach ^= low
        return accepted >= self.required * (accepted + refused)


def _join_fragments(members, mask, total, owner, peak_xy: np.ndarray, reach: float, evidence: JoinEvidence) -> None:
    """Join partial people that no connection joined: each to the nearest one at least as large that it can complete
    (no keypoint type in common) and that the maps do not keep apart (``evidence``), when its nearest keypoint is
    within ``reach`` times the larger one's size (the diagonal of its keypoints' box), nearest pairs (relative to that
    size) first."""
    alive = [q for q in range(len(members)) if len(members[q]) >= 1]
    big = [q for q in alive if len(members[q]) >= 2]
    if not big:
        return
    xy = np.asarray(peak_xy, np.float64)
    pairs = []
    for f in alive:
        for h in big:
            if h == f or len(members[h]) < len(members[f]) or mask[h] & mask[f]:
                continue
            hp, fp = xy[members[h]], xy[members[f]]
            size = max(np.hypot(*(hp.max(0) - hp.min(0))), np.hypot(*(fp.max(0) - fp.min(0))))
            dist = np.sqrt(((hp[:, None, :] - fp[None, :, :]) ** 2).sum(-1))
            d = dist.min()
            if size > 0 and d <= reach * size:
                i, j = np.unravel_index(dist.argmin(), dist.shape)
                pairs.append((d / size, f, h, members[h][i], members[f][j]))  # the nearest keypoints last
    pairs.sort()
    for _, f, h, near_h, near_f in pairs:
        if not members[f] or not members[h] or mask[h] & mask[f]:
            continue
        if not evidence.joins(members[f], members[h], mask[f], mask[h]):
            continue
        on_person = evidence.along(np.array([near_h]), np.array([near_f]))
        if on_person is not None and not on_person[0]:
            continue
        for peak in members[f]:
            owner[peak] = h
        members[h] += members[f]
        members[f] = []
        mask[h] |= mask[f]
        total[h] += total[f]


def person_scores(totals: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """(P,) person scores in [0, 1) of one image's people from their (P,) totals (>= 0: keypoint scores plus link
    scores) and keypoint counts (docs/evaluation.md#from-people-to-coco-results).

    A person of two or more keypoints scores ``0.5 + 0.5 * total / (1 + total)``, in [0.5, 1): it grows with the
    evidence gathered, in the order of the original's ``1 - 1 / total``, so the ranking, and with it the AP, is the
    original's. A one-keypoint person scores ``0.5 * total / (1 + total)``, in [0, 0.5): strictly after every person
    of two or more keypoints in any image, still ordered by its own evidence.
    """
    totals = np.maximum(np.asarray(totals, np.float64), 0.0)
    several = np.asarray(counts) >= 2
    return np.where(several, 0.5, 0.0) + 0.5 * totals / (1.0 + totals)


def _extend(people: _PartialPeople, p, a, pa, b, pb, s, length, scores, len_rate) -> None:
    """One person holds pa and/or pb: attach, replace or re-link the ends (original branch 2, fixed)."""
    slots, links = people.slots[p], people.links[p]
    short_enough = length < len_rate * people.maxlen[p]
    held_b = slots[b]
    if held_b == EMPTY:
        if short_enough:
            people.attach(p, b, pb, s, length, scores)
    elif held_b != pb:
        if links[b] < s and short_enough and people.owner[pb] == EMPTY:
            people.replace(p, b, pb, s, length, scores)
    elif links[b] <= s:
        people.total[p] += s - links[b]
        links[b] = s
        people.maxlen[p] = max(people.maxlen[p], length)
    # fix: found through the "to" end, the "from" end is attached too when its slot is free
    if slots[a] == EMPTY and people.owner[pa] == EMPTY and slots[b] == pb and short_enough:
        people.attach(p, a, pa, s, length, scores)


def _two_people(people: _PartialPeople, p1, p2, a, pa, b, pb, s, length, scores, params: DecodeSettings) -> None:
    """pa and pb belong to two different people: merge them, or settle a contested keypoint."""
    s1, s2 = people.slots[p1], people.slots[p2]
    disjoint = all(x == EMPTY or y == EMPTY for x, y in zip(s1, s2))
    if disjoint:
        tol = min(people.min_link(p1), people.min_link(p2))
        if s >= params.connection_tolerance * tol and length < params.len_rate * people.maxlen[p1]:
            people.merge(p1, p2, s, length)
        return
    if not params.remove_recon:
        return
    # the keypoint of this connection held by each person; the original crashed if it was missing
    c1 = a if s1[a] == pa else (b if s1[b] == pb else None)
    c2 = a if s2[a] == pa else (b if s2[b] == pb else None)
    if c1 is None or c2 is None:
        return
    l1, l2 = people.links[p1][c1], people.links[p2][c2]
    if s < l1 and s < l2:
        return
    if l1 < l2:
        people.remove(p1, c1, scores)
    else:
        people.remove(p2, c2, scores)

"""An independent, per-sample GDPO written from the paper's equations with Python floats.

Slow on purpose: loops and the statistics module, no torch, so it shares no code path with
gdpo_verl.core.advantage.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict


def reference_gdpo(rewards, mask, index, weights=None, *, norm_by_std=True, batch_norm="token", eps=1e-6):
    """rewards: name -> list of floats (B,) or list of lists (B, T); mask: list of lists of 0/1."""
    batch_size = len(mask)
    names = list(rewards)
    weights = weights or {name: 1.0 for name in names}
    valid = [sum(row) for row in mask]

    scores = {}
    for name in names:
        column = []
        for b in range(batch_size):
            value = rewards[name][b]
            if isinstance(value, list):
                value = sum(v for v, m in zip(value, mask[b]) if m)
            column.append(float(value))
        scores[name] = column

    members = defaultdict(list)
    for b in range(batch_size):
        members[index[b]].append(b)

    summed = [0.0] * batch_size
    for name in names:
        for b in range(batch_size):
            group = [scores[name][m] for m in members[index[b]]]
            if len(set(group)) == 1:
                z = 0.0
            else:
                centered = scores[name][b] - statistics.fmean(group)
                z = centered / (statistics.stdev(group) + eps) if norm_by_std else centered
            summed[b] += weights[name] * z

    if batch_norm == "token":
        total = sum(valid)
        mean = sum(n * a for n, a in zip(valid, summed)) / total
        var = sum(n * (a - mean) ** 2 for n, a in zip(valid, summed)) / (total - 1)
        final = [(a - mean) / math.sqrt(var + 1e-8) for a in summed]
    elif batch_norm == "sequence":
        kept = [a for a, n in zip(summed, valid) if n > 0]
        mean = statistics.fmean(kept)
        std = statistics.stdev(kept)
        final = [(a - mean) / (std + eps) for a in summed]
    else:
        final = summed
    return [[final[b] * m for m in mask[b]] for b in range(batch_size)]


def reference_variants(scores, valid, index, weights=None, *, applies=None, baseline="mean", conflict="none",
                       threshold=0.8, adaptive="none", norm_by_std=True, batch_norm="token", eps=1e-6):
    """GDPO with the options beyond the paper, one response at a time, from the formulas in docs/estimator.md.

    scores: name -> list of floats (B,); valid: valid tokens per response; applies: name -> list of bools (None:
    everywhere). Returns the final advantage of each response (a list of floats).
    """
    names = list(scores)
    size = len(valid)
    applies = {name: (applies or {}).get(name) or [True] * size for name in names}
    weights = dict(weights or {name: 1.0 for name in names})
    members = defaultdict(list)
    for b in range(size):
        members[index[b]].append(b)

    if adaptive == "saw":  # w_k = K * CV_k / (sum_j CV_j + 1e-8), CV = std / (|mean| + 1e-8) over the batch
        cvs = {}
        for name in names:
            values = [scores[name][b] for b in range(size) if applies[name][b] and valid[b] > 0]
            cvs[name] = (statistics.stdev(values) / (abs(statistics.fmean(values)) + 1e-8)
                         if len(values) >= 2 else 0.0)
        total = sum(cvs.values()) + 1e-8
        weights = {name: weights[name] * len(names) * cvs[name] / total for name in names}

    contributions = [[0.0] * len(names) for _ in range(size)]
    for k, name in enumerate(names):
        for b in range(size):
            if not applies[name][b]:
                continue
            group = [scores[name][m] for m in members[index[b]] if applies[name][m]]
            if len(set(group)) == 1:
                continue
            x = scores[name][b]
            if baseline == "mean":
                centered = x - statistics.fmean(group)
                z = centered / (statistics.stdev(group) + eps) if norm_by_std else centered
            else:
                others = list(group)
                others.remove(x)
                centered = x - statistics.fmean(others)
                spread = statistics.stdev(others) if len(others) >= 2 else 0.0
                if len(others) < 2 or len(set(others)) == 1:  # the others are equal: the group's std scales instead
                    spread = statistics.stdev(group)
                z = centered / (spread + eps) if norm_by_std else centered
            contributions[b][k] = weights[name] * z

    keep = [True] * size
    if conflict != "none":
        for b in range(size):
            row = contributions[b]
            mixed = any(c > 1e-8 for c in row) and any(c < -1e-8 for c in row)
            if conflict == "snr":
                mixed = mixed and abs(sum(row) / (sum(abs(c) for c in row) + 1e-8)) < threshold
            keep[b] = not mixed
    summed = [sum(row) for row in contributions]
    if conflict != "none":
        for b in range(size):
            group = members[index[b]]
            summed[b] *= (sum(keep[m] for m in group) / len(group)) * keep[b]

    # a response no reward applies to is paid nothing and is left out of the batch statistics
    keep = [keep[b] and any(applies[name][b] for name in names) for b in range(size)]
    if batch_norm == "none":
        return [a if keep[b] else 0.0 for b, a in enumerate(summed)]
    counts = [(n if batch_norm == "token" else float(n > 0)) * keep[b] for b, n in enumerate(valid)]
    total = sum(counts)
    if total < 2:
        return [0.0] * size
    mean = sum(n * a for n, a in zip(counts, summed)) / total
    var = sum(n * (a - mean) ** 2 for n, a in zip(counts, summed)) / (total - 1)
    scale = math.sqrt(var + 1e-8) if batch_norm == "token" else math.sqrt(var) + eps
    return [(a - mean) / scale if keep[b] else 0.0 for b, a in enumerate(summed)]

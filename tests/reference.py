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

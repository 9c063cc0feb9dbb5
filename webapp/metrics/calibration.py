"""Calibration of the drafting model: shown drafts binned by confidence, each bin's accept rate against its mean confidence."""

from __future__ import annotations

from dataclasses import dataclass

from webapp.metrics.aggregates import CALIBRATION_BINS
from webapp.metrics.daily import DayMetrics


@dataclass
class CalibrationBin:
    lo: float
    hi: float
    n: int
    mean_confidence: float | None
    accept_rate: float | None


@dataclass
class Calibration:
    bins: list[CalibrationBin]
    n: int
    ece: float | None  # sum over bins of n_b / n * |accept rate_b - mean confidence_b|


def calibration_from_days(days: list[DayMetrics]) -> Calibration:
    """Bin shown drafts by confidence and compare each bin's accept rate with its mean confidence."""
    totals = [[0.0, 0.0, 0.0] for _ in range(CALIBRATION_BINS)]
    for d in days:
        for b, (n, conf, acc) in enumerate(d.calib or []):
            totals[b][0] += n
            totals[b][1] += conf
            totals[b][2] += acc
    total = sum(t[0] for t in totals)
    bins = []
    ece = 0.0
    for b, (n, conf, acc) in enumerate(totals):
        mean_conf = conf / n if n else None
        rate = acc / n if n else None
        if rate is not None and mean_conf is not None:
            ece += n / total * abs(rate - mean_conf)
        bins.append(CalibrationBin(b / CALIBRATION_BINS, (b + 1) / CALIBRATION_BINS, int(n), mean_conf, rate))
    return Calibration(bins, int(total), ece if total else None)

"""Prometheus text exposition of a node's metrics, with no dependency beyond the standard library."""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


class Histogram:
    def __init__(self, buckets: Sequence[float] = LATENCY_BUCKETS) -> None:
        self.buckets = tuple(buckets)
        self.counts = [0] * len(self.buckets)
        self.total = 0
        self.sum = 0.0
        self._lock = threading.Lock()

    def observe(self, value: float) -> None:
        with self._lock:
            self.total += 1
            self.sum += value
            for index, bound in enumerate(self.buckets):
                if value <= bound:
                    self.counts[index] += 1

    def lines(self, name: str, labels: str = "") -> list[str]:
        prefix = f"{labels}," if labels else ""
        out = [f'{name}_bucket{{{prefix}le="{bound}"}} {count}'
               for bound, count in zip(self.buckets, self.counts, strict=True)]
        out.append(f'{name}_bucket{{{prefix}le="+Inf"}} {self.total}')
        suffix = f"{{{labels}}}" if labels else ""
        out.append(f"{name}_sum{suffix} {self.sum}")
        out.append(f"{name}_count{suffix} {self.total}")
        return out


@dataclass(frozen=True)
class Series:
    """One metric with labels: a value for each label set (``counter`` when named ``_total``)."""

    name: str
    description: str
    samples: Sequence[tuple[Mapping[str, str], float]]

    def lines(self) -> list[str]:
        kind = "counter" if self.name.endswith("_total") else "gauge"
        out = [f"# HELP {self.name} {self.description}", f"# TYPE {self.name} {kind}"]
        for labels, value in self.samples:
            text = ",".join(f'{key}="{_escaped(label)}"' for key, label in sorted(labels.items()))
            out.append(f"{self.name}{{{text}}} {value}")
        return out


def _escaped(label: str) -> str:
    """A label value as Prometheus' text format writes it."""
    return label.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


class NodeMetrics:
    def __init__(self) -> None:
        self.statement_latency = Histogram()
        self.requests_by_outcome: dict[str, int] = {}
        self._lock = threading.Lock()

    def count_request(self, outcome: str) -> None:
        with self._lock:
            self.requests_by_outcome[outcome] = self.requests_by_outcome.get(outcome, 0) + 1

    def render(self, gauges: dict[str, tuple[str, float]], state: str,
               states: Sequence[str], series: Sequence[Series] = ()) -> str:
        lines = ["# HELP metastore_statement_latency_seconds Time to answer POST /ksql requests "
                 "that write the log.",
                 "# TYPE metastore_statement_latency_seconds histogram",
                 *self.statement_latency.lines("metastore_statement_latency_seconds"),
                 "# HELP metastore_requests_total /ksql requests by outcome.",
                 "# TYPE metastore_requests_total counter"]
        lines += [f'metastore_requests_total{{outcome="{outcome}"}} {count}'
                  for outcome, count in sorted(self.requests_by_outcome.items())]
        for name, (help_text, value) in gauges.items():
            kind = "counter" if name.endswith("_total") else "gauge"
            lines += [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}", f"{name} {value}"]
        lines += ["# HELP metastore_state The node's state (1 for the current one).",
                  "# TYPE metastore_state gauge"]
        lines += [f'metastore_state{{state="{s}"}} {1 if s == state else 0}' for s in states]
        for one in series:
            lines += one.lines()
        return "\n".join(lines) + "\n"

#!/usr/bin/env python3
"""Parses Prometheus text exposition with the reference client's parser and checks histogram invariants.

usage: check-prometheus-text.py FILE
Exits 0 and prints one line per family (name type samples) when the text parses and every histogram has
cumulative, monotone buckets ending in +Inf equal to _count, with _sum present; exits 1 naming the problem.
Needs the PyPI package prometheus-client.
"""
import math
import sys

from prometheus_client.parser import text_string_to_metric_families


def check(text):
    problems = []
    families = list(text_string_to_metric_families(text))
    for family in families:
        print(f"{family.name} {family.type} {len(family.samples)}")
        if family.type != "histogram":
            continue
        series = {}
        for sample in family.samples:
            labels = {k: v for k, v in sample.labels.items() if k != "le"}
            key = tuple(sorted(labels.items()))
            entry = series.setdefault(key, {"buckets": [], "count": None, "sum": None})
            if sample.name.endswith("_bucket"):
                entry["buckets"].append((float(sample.labels["le"]), sample.value))
            elif sample.name.endswith("_count"):
                entry["count"] = sample.value
            elif sample.name.endswith("_sum"):
                entry["sum"] = sample.value
        for key, entry in series.items():
            where = f"{family.name}{dict(key)}"
            bounds = [b for b, _ in entry["buckets"]]
            counts = [c for _, c in entry["buckets"]]
            if not bounds or not math.isinf(bounds[-1]):
                problems.append(f"{where}: no +Inf bucket")
                continue
            if bounds != sorted(bounds) or len(set(bounds)) != len(bounds):
                problems.append(f"{where}: bucket bounds not increasing: {bounds}")
            if any(b > a for a, b in zip(counts[1:], counts)):
                problems.append(f"{where}: bucket counts not cumulative/monotone: {counts}")
            if entry["count"] is None or entry["sum"] is None:
                problems.append(f"{where}: missing _count or _sum")
            elif counts[-1] != entry["count"]:
                problems.append(f"{where}: +Inf bucket {counts[-1]} != _count {entry['count']}")
    return problems


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    with open(sys.argv[1], encoding="utf-8") as f:
        text = f.read()
    try:
        problems = check(text)
    except Exception as error:  # the parser raises ValueError and friends on malformed text
        print(f"parse error: {error}", file=sys.stderr)
        return 1
    for problem in problems:
        print(problem, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

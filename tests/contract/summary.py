"""Summarises a schemathesis NDJSON report: requests per operation and status,
with the probes of undeclared methods on one line.

    python tests/contract/summary.py docs/openapi.yaml target/contract-report/ndjson-*.ndjson
"""

import collections
import json
import sys

import yaml


def main(spec, reports):
    with open(spec, encoding="utf-8") as f:
        paths = yaml.safe_load(f)["paths"]
    declared = {f"{method.upper()} {path}" for path, item in paths.items() for method in item if method != "parameters"}
    statuses = collections.defaultdict(collections.Counter)
    modes = collections.defaultdict(collections.Counter)
    phases = collections.Counter()
    for report in reports:
        with open(report, encoding="utf-8") as events:
            for line in events:
                finished = json.loads(line).get("ScenarioFinished")
                if not finished:
                    continue
                recorder = finished["recorder"]
                cases = recorder.get("cases", {})
                for case_id, interaction in recorder.get("interactions", {}).items():
                    case = cases.get(case_id, {}).get("value", {})
                    label = f'{case.get("method", "?")} {case.get("path", recorder["label"])}'
                    if label not in declared:
                        label = "undeclared methods"
                    response = interaction.get("response")
                    statuses[label][response["status_code"] if response else "no response"] += 1
                    modes[label][(case.get("meta") or {}).get("generation", {}).get("mode", "?")] += 1
                    phases[finished["phase"]] += 1
    total = sum(sum(c.values()) for c in statuses.values())
    print(f"requests: {total} ({', '.join(f'{p} {n}' for p, n in sorted(phases.items()))})")
    for label in sorted(statuses):
        codes = ", ".join(f"{code}: {n}" for code, n in sorted(statuses[label].items(), key=str))
        kinds = ", ".join(f"{m} {n}" for m, n in sorted(modes[label].items()))
        print(f"  {label}: {sum(statuses[label].values())} ({kinds}); statuses {codes}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])

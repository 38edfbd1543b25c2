"""Copy a CustomResourceDefinition's validation schema into tests/data/kubernetes/, so that the
manifests of deploy/kubernetes/ are validated without a cluster or a network.

    curl -sLO https://raw.githubusercontent.com/kubeflow/spark-operator/v2.5.2/charts/spark-operator-chart/crds/sparkoperator.k8s.io_sparkapplications.yaml
    python scripts/vendor_crd_schema.py sparkoperator.k8s.io_sparkapplications.yaml v1beta2 \\
        tests/data/kubernetes/sparkoperator.k8s.io_v1beta2_sparkapplication.json

The output names the resource (apiVersion, kind) and holds the version's openAPIV3Schema as it
is, less the `description` texts (about three quarters of the bytes; they validate nothing).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import yaml

# Where an OpenAPI schema holds other schemas (`properties` maps a field name to one).
NESTED = ("items", "additionalProperties", "not")
NESTED_LISTS = ("allOf", "anyOf", "oneOf")


def without_descriptions(schema: dict) -> dict:
    out = {}
    for keyword, value in schema.items():
        if keyword == "description":
            continue
        if keyword == "properties":
            value = {name: without_descriptions(field) for name, field in value.items()}
        elif keyword in NESTED and isinstance(value, dict):
            value = without_descriptions(value)
        elif keyword in NESTED_LISTS:
            value = [without_descriptions(item) for item in value]
        out[keyword] = value
    return out


def vendored(crd: dict, version: str) -> dict:
    (served,) = [v for v in crd["spec"]["versions"] if v["name"] == version]
    return {"apiVersion": f"{crd['spec']['group']}/{version}",
            "kind": crd["spec"]["names"]["kind"],
            "openAPIV3Schema": without_descriptions(served["schema"]["openAPIV3Schema"])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("crd", type=Path, help="the upstream CRD YAML")
    parser.add_argument("version", help="the served version to copy, e.g. v1beta2")
    parser.add_argument("output", type=Path)
    args = parser.parse_args()
    crd = yaml.safe_load(args.crd.read_text())
    args.output.write_text(json.dumps(vendored(crd, args.version), indent=1, sort_keys=True)
                           + "\n")


if __name__ == "__main__":
    main()

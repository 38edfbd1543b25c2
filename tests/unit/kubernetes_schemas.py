"""Validating Kubernetes objects as the API server would, without a cluster or a network; shared
by tests/unit/test_kubernetes_manifests.py and tests/unit/test_helm_chart.py. Not a test module.

- structural(schema): a CRD's openAPIV3Schema as JSON Schema with the API server's structural
  rules (an undeclared field is refused unless the object preserves unknown fields; `nullable`
  admits null).
- crd_validator(openapi_schema): a Draft 4 validator of it.
- VENDORED: the validators of the schemas vendored in tests/data/kubernetes/ (its README names
  their sources), by (apiVersion, kind).
- prometheus_operator_crds(): the validators of the prometheus-operator CRDs of the Go module
  that the Makefile's `helm` target downloads into Go's module cache (read with GOPROXY=off:
  nothing is downloaded here).
- builtin_problems(document): a built-in kind's problems against Kubernetes' own JSON schemas,
  strict (undeclared fields refused), from the kubernetes-validate package.
"""

from __future__ import annotations

import copy
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import jsonschema
import yaml

REPO = Path(__file__).resolve().parents[2]
VENDORED_DIR = REPO / "tests" / "data" / "kubernetes"
# The Kubernetes version whose schemas validate built-in kinds (kubernetes-validate ships one
# set per minor version); `helm template --kube-version` renders for the same.
KUBERNETES_VERSION = "1.36.0"


def structural(schema: dict) -> dict:
    """The CRD's OpenAPI schema as JSON Schema with the API server's rules: a field an object
    does not declare is refused (kubectl's strict field validation; unless the object preserves
    unknown fields), and `nullable` admits null."""
    out = dict(schema)
    if "properties" in out:
        out["properties"] = {name: structural(field) for name, field in out["properties"].items()}
        if "additionalProperties" not in out and not out.get("x-kubernetes-preserve-unknown-fields"):
            out["additionalProperties"] = False
    for keyword in ("items", "additionalProperties"):
        if isinstance(out.get(keyword), dict):
            out[keyword] = structural(out[keyword])
    for keyword in ("allOf", "anyOf", "oneOf"):
        if keyword in out:
            out[keyword] = [structural(item) for item in out[keyword]]
    if out.get("nullable") and "type" in out:
        out["type"] = [out["type"], "null"]
    if isinstance(out.get("pattern"), str):
        out["pattern"] = python_pattern(out["pattern"])
    return out


def python_pattern(pattern: str) -> str:
    """A pattern of the API server's (Go's regexp) as Python's re reads it: Go allows flags after
    the `^` (`^(?i)abort`, the PrometheusRule CRD's), Python only at the very start.

    >>> python_pattern("^(?i)(abort|warn)?$")
    '(?i)^(abort|warn)?$'
    """
    return re.sub(r"^\^(\(\?[a-zA-Z]+\))", r"\1^", pattern)


def crd_validator(openapi_schema: dict) -> jsonschema.Draft4Validator:
    schema = structural(openapi_schema)
    jsonschema.Draft4Validator.check_schema(schema)
    return jsonschema.Draft4Validator(schema)


def vendored_validators() -> dict[tuple[str, str], jsonschema.Draft4Validator]:
    found = {}
    for path in sorted(VENDORED_DIR.glob("*.json")):
        vendored = json.loads(path.read_text())
        found[vendored["apiVersion"], vendored["kind"]] = crd_validator(vendored["openAPIV3Schema"])
    return found


VENDORED = vendored_validators()


def errors_of(validator: jsonschema.protocols.Validator, document: dict) -> list[str]:
    return [f"{'.'.join(map(str, error.absolute_path))}: {error.message}"
            for error in validator.iter_errors(document)]


def makefile_variable(name: str) -> str:
    """A `NAME := value` (or `?=`) of the Makefile: the pinned versions live there, once."""
    found = re.search(rf"^{name}\s*[:?]?=\s*(\S+)\s*$", (REPO / "Makefile").read_text(), re.M)
    if found is None:
        raise LookupError(f"Makefile sets no {name}")
    return found.group(1)


def go_module_dir(module_at_version: str) -> Path:
    """The module's directory in Go's module cache, which `make helm` filled; GOPROXY=off, so a
    module missing there fails here instead of being downloaded."""
    go = shutil.which("go")
    if go is None:
        raise FileNotFoundError("go is not installed (the Makefile's helm target needs it)")
    done = subprocess.run([go, "mod", "download", "-json", module_at_version],
                          capture_output=True, text=True, timeout=120, cwd="/",
                          env={**os.environ, "GOPROXY": "off", "GOFLAGS": "-mod=mod"})
    answer = json.loads(done.stdout or "{}")
    if done.returncode != 0 or "Dir" not in answer:
        raise FileNotFoundError(f"{module_at_version} is not in Go's module cache (run `make "
                                f"helm`): {answer.get('Error') or done.stderr.strip()}")
    return Path(answer["Dir"])


class CrdLoader(yaml.SafeLoader):
    """PyYAML reads a plain `=` as the YAML 1.1 `value` tag, which it cannot construct; the CRDs
    have `=` as an enum member (an operator)."""


CrdLoader.add_constructor("tag:yaml.org,2002:value", lambda loader, node: str(node.value))


def crd_validators(crd_paths: list[Path]) -> dict[tuple[str, str], jsonschema.Draft4Validator]:
    """(apiVersion, kind) -> validator, for every served version of each CRD file."""
    found = {}
    for path in crd_paths:
        crd = yaml.load(path.read_text(), Loader=CrdLoader)  # noqa: S506 - a SafeLoader
        for version in crd["spec"]["versions"]:
            key = (f"{crd['spec']['group']}/{version['name']}", crd["spec"]["names"]["kind"])
            found[key] = crd_validator(version["schema"]["openAPIV3Schema"])
    return found


# The prometheus-operator CRDs the Helm chart renders objects of.
PROMETHEUS_OPERATOR_KINDS = ("servicemonitors", "podmonitors", "prometheusrules")


def prometheus_operator_crds() -> dict[tuple[str, str], jsonschema.Draft4Validator]:
    module = go_module_dir(makefile_variable("PROMETHEUS_OPERATOR_MODULE"))
    crds = [module / "example" / "prometheus-operator-crd" / f"monitoring.coreos.com_{name}.yaml"
            for name in PROMETHEUS_OPERATOR_KINDS]
    missing = [str(path) for path in crds if not path.is_file()]
    if missing:
        raise FileNotFoundError(f"not in the module: {', '.join(missing)}")
    return crd_validators(crds)


def builtin_problems(document: dict) -> list[str]:
    """A built-in kind's problems against Kubernetes' JSON schemas (strict: an undeclared field
    is refused); raises kubernetes_validate.SchemaNotFoundError for a kind it does not know."""
    import kubernetes_validate

    try:
        kubernetes_validate.validate(document, KUBERNETES_VERSION, strict=True)
    except kubernetes_validate.ValidationError as error:
        return [f"{'.'.join(map(str, error.path))}: {error.message}"]
    return []


def with_field_set(document: dict, path: str, value) -> dict:
    """A copy of `document` with the field at `path` (dots; a number indexes a list) set: a
    broken manifest for a test to see refused."""
    changed = copy.deepcopy(document)
    *parents, last = [int(key) if key.isdigit() else key for key in path.split(".")]
    node = changed
    for key in parents:
        node = node[key]
    node[last] = value
    return changed

"""The Helm oracle of tests/helm/: prints what `helm template --include-crds` prints for one case.

Usage: PYTHON helm_template.py CASE_DIR     (PYTHON: a venv with helm-python-sdk==0.2.2 and PyYAML;
scripts/test makes it at $KILN_CACHE_DIR/helm-venv)

A case is a folder with `chart/` and an optional `case.json`:
  {"values": ["file.yaml", ...], "set": ["a=b"], "set_string": ["c=d"], "release": "R",
   "namespace": "NS", "kube_version": "v1.30.0", "api_versions": ["x/v1"], "skip_crds": false}

The engine is Helm v4.2.3's Go SDK (libhelm_c, through the package `helm_python`). A client-only
dry-run install is the code path of `helm template`: its manifest is Helm's sorted output with
dependency conditions, tags and kubeVersion checks applied. CRDs (the chart's and its enabled
subcharts' `crds/` files) are printed first, as `--include-crds` does. Hooks are not printed
(the SDK's install summary does not carry them; the corpus has no hooks yet).

Values travel to the library as JSON, so `--set` integers arrive as float64 (the helm CLI keeps
int64): cases avoid integers of 1,000,000 or more in `set`. Each `set` expression is parsed by
the library's own strvals parser and deep-merged into the values.

Exit status: 0 and the stream on stdout; 2 and Helm's error on stderr when Helm refuses.
"""

import json
import os
import sys

sys.dont_write_bytecode = True

import helm_python  # noqa: E402
from helm_python import _native  # noqa: E402
from helm_python.config import Config  # noqa: E402
from helm_python.errors import HelmError  # noqa: E402

KUBECONFIG = """apiVersion: v1
kind: Config
clusters: [{cluster: {server: "https://127.0.0.1:9"}, name: c}]
contexts: [{context: {cluster: c, user: u}, name: c}]
current-context: c
users: [{name: u, user: {token: unused}}]
"""


def deep_merge(base, over):
    """Helm's MergeMaps: `over` wins; maps merge key by key."""
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = value
    return out


def documents(text):
    """A values file's YAML documents (a line `---`, maybe followed by a comment, ends one)."""
    docs, current = [], []
    for line in text.splitlines(keepends=True):
        rest = line[3:].strip() if line.startswith("---") else None
        if rest is not None and (rest == "" or rest.startswith("#")):
            docs.append("".join(current))
            current = []
        else:
            current.append(line)
    docs.append("".join(current))
    return docs


def values_of(case_dir, case):
    values = {}
    for name in case.get("values", []):
        with open(os.path.join(case_dir, "chart", name), encoding="utf-8") as f:
            for doc in documents(f.read()):
                if doc.strip():
                    values = deep_merge(values, helm_python.values_from_yaml(doc) or {})
    for key, function in (("set", "helm_strvals_parse"), ("set_string", "helm_strvals_parse_string")):
        for expr in case.get(key, []):
            values = deep_merge(values, json.loads(_native.call_string(function, expr)))
    return values


def main(case_dir):
    path = os.path.join(case_dir, "case.json")
    case = json.load(open(path, encoding="utf-8")) if os.path.exists(path) else {}
    namespace = case.get("namespace", "default")
    options = {"dry_run": "client", "namespace": namespace, "skip_crds": bool(case.get("skip_crds"))}
    if case.get("kube_version"):
        options["kube_version"] = case["kube_version"]
    if case.get("api_versions"):
        options["api_versions"] = case["api_versions"]
    try:
        values = values_of(case_dir, case)
        chart = helm_python.Chart.load(os.path.join(case_dir, "chart"))
    except (HelmError, OSError) as e:
        sys.stderr.write("Error: %s\n" % e)
        return 2
    config = Config(kubeconfig_content=KUBECONFIG, namespace=namespace, storage_driver="memory")
    try:
        summary = json.loads(
            _native.call_string(
                "helm_install", config._raw(), _native.HANDLE(0), chart._raw(), None,
                case.get("release", "release-name"), json.dumps(values), json.dumps(options),
            )
        )
        crds = [] if case.get("skip_crds") else chart.crds
    except HelmError as e:
        sys.stderr.write("Error: %s\n" % e)
        return 2
    finally:
        chart.close()
        config.close()
    out = "".join("---\n# Source: %s\n%s\n" % (c["filename"], c["data"]) for c in crds)
    sys.stdout.write(out + summary.get("manifest", ""))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))

"""The Helm oracle of tests/helm/: prints what `helm template --include-crds` prints for one case.

Usage: PYTHON helm_template.py CASE_DIR     (PYTHON: a venv with helm-python-sdk==0.2.2 and PyYAML;
scripts/test makes it at $KILN_CACHE_DIR/helm-venv)

A case is a folder with `chart/` and an optional `case.json`:
  {"values": ["file.yaml", ...], "set": ["a=b"], "set_string": ["c=d"], "release": "R",
   "namespace": "NS", "kube_version": "v1.30.0", "api_versions": ["x/v1"], "skip_crds": false}

The engine is Helm v4.2.3's Go SDK (libhelm_c, through the package `helm_python`). A client-only
dry-run install is the code path of `helm template`: its manifest is Helm's sorted output with
dependency conditions, tags and kubeVersion checks applied. CRDs (the chart's and its enabled
subcharts' `crds/` files) are printed first, as `--include-crds` does. The install summary does not
carry hooks: the chart is rendered again (`helm_render`, same values and options), and the documents
annotated `helm.sh/hook` (with known events) are printed last, sorted by Helm's install order of
kinds, as `helm template` prints them.

Values travel to the library as JSON, so `--set` integers arrive as float64 (the helm CLI keeps
int64): cases avoid integers of 1,000,000 or more in `set`. Each `set` expression is parsed by
the library's own strvals parser and deep-merged into the values.

With `--objects`, the stream's objects are printed instead, one JSON text a line, each document
read as Helm's install reads it (sigs.k8s.io/yaml: go-yaml v2, YAML 1.1 scalars, then JSON): by
Helm's own values reader, which reads a values.yaml the same way. Empty documents are left out.

Exit status: 0 and the stream on stdout; 2 and Helm's error on stderr when Helm refuses.
"""

import json
import os
import re
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


INSTALL_ORDER = [
    "PriorityClass", "Namespace", "NetworkPolicy", "ResourceQuota", "LimitRange", "PodSecurityPolicy",
    "PodDisruptionBudget", "ServiceAccount", "Secret", "SecretList", "ConfigMap", "StorageClass",
    "PersistentVolume", "PersistentVolumeClaim", "CustomResourceDefinition", "ClusterRole",
    "ClusterRoleList", "ClusterRoleBinding", "ClusterRoleBindingList", "Role", "RoleList", "RoleBinding",
    "RoleBindingList", "Service", "DaemonSet", "Pod", "ReplicationController", "ReplicaSet", "Deployment",
    "HorizontalPodAutoscaler", "StatefulSet", "Job", "CronJob", "IngressClass", "Ingress", "APIService",
    "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration",
]
HOOK_EVENTS = {"pre-install", "post-install", "pre-delete", "post-delete", "pre-upgrade", "post-upgrade",
               "pre-rollback", "post-rollback", "test", "test-success"}
SEPARATOR = re.compile(r"(?:^|\s*\n)---\s*")


def hooks_of(files):
    """The hook documents of a raw render, as `helm template` prints them (sorted by kind, stable)."""
    import yaml

    found = []
    for path in sorted(files):
        text = files[path]
        if path.endswith("NOTES.txt") or os.path.basename(path).startswith("_") or not text.strip():
            continue
        for doc in SEPARATOR.split(text.lstrip()):
            if not doc.strip():
                continue
            doc = doc.lstrip()
            head = yaml.safe_load(doc)
            head = head if isinstance(head, dict) else {}
            annotations = (head.get("metadata") or {}).get("annotations") or {}
            if "helm.sh/hook" not in annotations:
                continue
            events = [e.strip().lower() for e in str(annotations["helm.sh/hook"]).split(",")]
            if all(e in HOOK_EVENTS for e in events):
                kind = str(head.get("kind") or "")
                rank = (0, INSTALL_ORDER.index(kind), "") if kind in INSTALL_ORDER else (1, 0, kind)
                found.append((rank, path, doc))
    found.sort(key=lambda h: h[0])
    return "".join("---\n# Source: %s\n%s\n" % (p, d) for _, p, d in found)


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


def objects_of(stream):
    """The objects of `stream` as Helm's install reads them (see --objects), one JSON text each."""
    import tempfile

    import yaml

    out = []
    with tempfile.TemporaryDirectory() as tmp:
        with open(os.path.join(tmp, "Chart.yaml"), "w", encoding="utf-8") as f:
            f.write("apiVersion: v2\nname: read\nversion: 0.1.0\n")
        for doc in SEPARATOR.split(stream.lstrip()):
            if yaml.safe_load(doc) is None:
                continue
            with open(os.path.join(tmp, "values.yaml"), "w", encoding="utf-8") as f:
                f.write(doc)
            try:
                chart = helm_python.Chart.load(tmp)
            except HelmError:
                # What Go's JSON encoder refuses (an infinity): read as YAML, non-finite as null.
                value = yaml.safe_load(doc)
                out.append(json.dumps(value, default=str).replace("Infinity", "null").replace("NaN", "null"))
                continue
            try:
                value = chart.values
            finally:
                chart.close()
            if value:
                out.append(json.dumps(value))
    return "".join(line + "\n" for line in out)


def main(case_dir, as_objects=False):
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
    chart = helm_python.Chart.load(os.path.join(case_dir, "chart"))
    try:
        render_options = {k: v for k, v in options.items() if k in ("kube_version", "api_versions")}
        render_options.update(name=case.get("release", "release-name"), namespace=namespace)
        files = json.loads(_native.call_string("helm_render", chart._raw(), json.dumps(values), json.dumps(render_options)))
    finally:
        chart.close()
    out = "".join("---\n# Source: %s\n%s\n" % (c["filename"], c["data"]) for c in crds)
    stream = out + summary.get("manifest", "") + hooks_of(files)
    sys.stdout.write(objects_of(stream) if as_objects else stream)
    return 0


if __name__ == "__main__":
    args = sys.argv[1:]
    sys.exit(main(args[-1], as_objects="--objects" in args))

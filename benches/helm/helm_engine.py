"""Helm v4.2.3's Go engine for benches/helm.rs: the client-only render `helm template` does.

Usage: PYTHON helm_engine.py once CHART_DIR RELEASE NAMESPACE [VALUES_FILE]
       PYTHON helm_engine.py serve RELEASE NAMESPACE

PYTHON is a venv with PyPI's helm-python-sdk==0.2.2 (scripts/test makes one at
$KILN_CACHE_DIR/helm-venv). One render is what `helm template RELEASE CHART_DIR -n NAMESPACE`
does in its process: load the chart directory, a client-only dry-run install (the code path of
`helm template`: values merged, templates rendered, sorted manifest), the manifest as text.

`once`: one render, as a `helm template` process per render does (Argo CD's repo-server): the
manifest on stdout, then `maxrss_kib=N` (the process's peak resident set) on stderr.

A VALUES_FILE (`helm template -f FILE`; relative to the chart) is read by Helm's own values parser
(`helm_python.values_from_yaml`, a document at a time, merged as Helm merges values files) in each
render, as the CLI reads it.

`serve`: the library is loaded once; the process then reads lines `CHART_DIR N [VALUES_FILE]` on
stdin (tab-separated), renders that chart N times in-process and answers one JSON line per request on stdout:
{"seconds": [per render], "rss_kib": current VmRSS, "maxrss_kib": peak so far}. Before the first
request it answers {"ready": true, "rss_kib": ..., "maxrss_kib": ...} (library loaded, nothing
rendered), so the bench can tell the memory renders add from the memory the library costs.
"""

import json
import os
import resource
import sys
import time

sys.dont_write_bytecode = True

import helm_python  # noqa: E402
from helm_python import _native  # noqa: E402
from helm_python.config import Config  # noqa: E402
from helm_python.errors import HelmError  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "support"))
import helm_template  # noqa: E402  (the corpus oracle's values-file reading)

# Never contacted: a client-only dry run only needs a configuration to exist.
KUBECONFIG = """apiVersion: v1
kind: Config
clusters: [{cluster: {server: "https://127.0.0.1:9"}, name: bench}]
contexts: [{context: {cluster: bench, user: bench}, name: bench}]
current-context: bench
users: [{name: bench, user: {token: unused}}]
"""


def values_of(chart_dir, values_file):
    """The user values of `-f VALUES_FILE`, read by Helm's parser (one document at a time, as the
    corpus oracle reads values files: tests/support/helm_template.py)."""
    if not values_file:
        return {}
    values = {}
    with open(os.path.join(chart_dir, values_file), encoding="utf-8") as f:
        for doc in helm_template.documents(f.read()):
            if doc.strip():
                values = helm_template.deep_merge(values, helm_python.values_from_yaml(doc) or {})
    return values


def render(chart_dir, release, namespace, values_file=None):
    """One client-only render of CHART_DIR: the manifest `helm template` prints (hooks aside)."""
    values = json.dumps(values_of(chart_dir, values_file))
    chart = helm_python.Chart.load(chart_dir)
    config = Config(kubeconfig_content=KUBECONFIG, namespace=namespace, storage_driver="memory")
    try:
        options = json.dumps({"dry_run": "client", "namespace": namespace})
        summary = _native.call_string(
            "helm_install", config._raw(), _native.HANDLE(0), chart._raw(), None, release, values, options
        )
    finally:
        chart.close()
        config.close()
    return json.loads(summary).get("manifest", "")


def memory():
    """(current VmRSS, peak resident set) of this process, in KiB."""
    current = 0
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                current = int(line.split()[1])
    return current, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def serve(release, namespace):
    current, peak = memory()
    print(json.dumps({"ready": True, "rss_kib": current, "maxrss_kib": peak}), flush=True)
    for line in sys.stdin:
        fields = line.rstrip("\n").split("\t")
        if len(fields) == 1:
            # The older form, `CHART_DIR N` separated by a space.
            fields = line.rsplit(maxsplit=1)
        chart_dir, count, values_file = fields[0], fields[1], (fields[2] if len(fields) > 2 else None)
        seconds = []
        for _ in range(int(count)):
            started = time.perf_counter()
            try:
                render(chart_dir, release, namespace, values_file)
            except HelmError as e:
                print(json.dumps({"error": str(e)}), flush=True)
                break
            seconds.append(time.perf_counter() - started)
        else:
            current, peak = memory()
            print(json.dumps({"seconds": seconds, "rss_kib": current, "maxrss_kib": peak}), flush=True)
            continue
    return 0


def main(argv):
    if len(argv) in (5, 6) and argv[1] == "once":
        sys.stdout.write(render(argv[2], argv[3], argv[4], argv[5] if len(argv) == 6 else None))
        sys.stdout.flush()
        sys.stderr.write("maxrss_kib=%d\n" % memory()[1])
        return 0
    if len(argv) == 4 and argv[1] == "serve":
        return serve(argv[2], argv[3])
    sys.stderr.write(__doc__)
    return 64


if __name__ == "__main__":
    sys.exit(main(sys.argv))

"""Helm v4.2.3's Go engine for benches/helm.rs: the client-only render `helm template` does.

Usage: PYTHON helm_engine.py once CHART_DIR RELEASE NAMESPACE
       PYTHON helm_engine.py serve RELEASE NAMESPACE

PYTHON is a venv with PyPI's helm-python-sdk==0.2.2 (scripts/test makes one at
$KILN_CACHE_DIR/helm-venv). One render is what `helm template RELEASE CHART_DIR -n NAMESPACE`
does in its process: load the chart directory, a client-only dry-run install (the code path of
`helm template`: values merged, templates rendered, sorted manifest), the manifest as text.

`once`: one render, as a `helm template` process per render does (Argo CD's repo-server): the
manifest on stdout, then `maxrss_kib=N` (the process's peak resident set) on stderr.

`serve`: the library is loaded once; the process then reads lines `CHART_DIR N` on stdin, renders
that chart N times in-process and answers one JSON line per request on stdout:
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

# Never contacted: a client-only dry run only needs a configuration to exist.
KUBECONFIG = """apiVersion: v1
kind: Config
clusters: [{cluster: {server: "https://127.0.0.1:9"}, name: bench}]
contexts: [{context: {cluster: bench, user: bench}, name: bench}]
current-context: bench
users: [{name: bench, user: {token: unused}}]
"""


def render(chart_dir, release, namespace):
    """One client-only render of CHART_DIR: the manifest `helm template` prints (hooks aside)."""
    chart = helm_python.Chart.load(chart_dir)
    config = Config(kubeconfig_content=KUBECONFIG, namespace=namespace, storage_driver="memory")
    try:
        options = json.dumps({"dry_run": "client", "namespace": namespace})
        summary = _native.call_string(
            "helm_install", config._raw(), _native.HANDLE(0), chart._raw(), None, release, "{}", options
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
        chart_dir, count = line.rsplit(maxsplit=1)
        seconds = []
        for _ in range(int(count)):
            started = time.perf_counter()
            render(chart_dir, release, namespace)
            seconds.append(time.perf_counter() - started)
        current, peak = memory()
        print(json.dumps({"seconds": seconds, "rss_kib": current, "maxrss_kib": peak}), flush=True)
    return 0


def main(argv):
    if len(argv) == 5 and argv[1] == "once":
        sys.stdout.write(render(argv[2], argv[3], argv[4]))
        sys.stdout.flush()
        sys.stderr.write("maxrss_kib=%d\n" % memory()[1])
        return 0
    if len(argv) == 4 and argv[1] == "serve":
        return serve(argv[2], argv[3])
    sys.stderr.write(__doc__)
    return 64


if __name__ == "__main__":
    sys.exit(main(sys.argv))

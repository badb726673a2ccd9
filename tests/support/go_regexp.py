"""Go's regexp, as Helm's Sprig functions run it: the oracle of the helm plugin's regexp property test.

Usage: PYTHON go_regexp.py CHART_DIR CASES_JSON     (PYTHON: the venv of helm_template.py)

CHART_DIR is a chart whose templates read `.Values.p` (a pattern) and `.Values.inputs` (texts);
CASES_JSON a file holding a JSON list of {"p": PATTERN, "inputs": [TEXT, ...]}. The chart is
loaded once and rendered by Helm v4.2.3's own engine (helm_python's `helm_render`, in this one
process) once per case, with the case as its values. One JSON line per case is printed, in order:
{"ok": {TEMPLATE_FILE: TEXT}} or {"error": HELM'S MESSAGE}.
"""

import json
import sys

sys.dont_write_bytecode = True

import helm_python  # noqa: E402
from helm_python import _native  # noqa: E402
from helm_python.errors import HelmError  # noqa: E402


def main(chart_dir, cases_path):
    cases = json.load(open(cases_path, encoding="utf-8"))
    chart = helm_python.Chart.load(chart_dir)
    options = json.dumps({"name": "release-name", "namespace": "default"})
    try:
        for case in cases:
            try:
                files = json.loads(_native.call_string("helm_render", chart._raw(), json.dumps(case), options))
                out = {"ok": {k: v for k, v in files.items() if not k.endswith("NOTES.txt")}}
            except HelmError as e:
                out = {"error": str(e)}
            sys.stdout.write(json.dumps(out) + "\n")
    finally:
        chart.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))

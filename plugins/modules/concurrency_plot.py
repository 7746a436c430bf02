#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: concurrency_plot
short_description: Draw a concurrency sweep as a PNG - tokens/s and p95 latency vs concurrent requests
version_added: 0.1.0
description:
  - Draws the levels returned by M(factory_floor.llm.concurrency_sweep) as a PNG with two panels - tokens/s against
    concurrent requests, one line per prompt profile, and the p95 of the recommendation's latency metric against
    concurrent requests with the target as a dashed line. The recommended C(max_num_seqs) is marked in both.
  - "Meant to run on the controller (C(delegate_to: localhost)), where matplotlib is installed; the sweep itself runs
    next to the engine."
  - The PNG carries no timestamp, so the same data draws the same bytes and the file is only rewritten when the data
    changed.
  - With O(check_only) it only checks that it can draw here (matplotlib importable by this Python) and says how to
    install matplotlib when it cannot; C(playbooks/tune-concurrency.yml) runs that before it loads the engine.
author:
  - Factory Floor maintainers (@factory-floor)
requirements:
  - matplotlib (Python library, on the host that runs the module)
extends_documentation_fragment:
  - ansible.builtin.files
  - factory_floor.llm.attributes
attributes:
  check_mode:
    support: full
    details: The PNG is drawn in memory and compared with O(dest); nothing is written.
  diff_mode:
    support: none
  idempotent:
    support: full
options:
  levels:
    description:
      - RV(factory_floor.llm.concurrency_sweep#module:levels) - dicts with at least C(profile), C(concurrency) and
        C(tokens_per_s), and the C(<metric>_p95) of O(metric).
      - Required unless O(check_only).
    type: list
    elements: dict
  dest:
    description:
      - Path of the PNG to write. Its directory must exist.
      - Required unless O(check_only).
    type: path
  check_only:
    description:
      - Only check that this host can draw the PNG - matplotlib imports in the Python that runs the module - and
        return its version; draw and write nothing. Fails, saying how to install matplotlib, when it cannot.
    type: bool
    default: false
  title:
    description:
      - Title above the panels.
    type: str
    default: Concurrency sweep
  recommended:
    description:
      - The recommended C(max_num_seqs) (RV(factory_floor.llm.concurrency_sweep#module:recommendation.max_num_seqs)),
        marked with a vertical line. Omit to mark nothing.
    type: int
  metric:
    description:
      - Which p95 the lower panel shows, seconds - V(e2e) (end-to-end latency), V(ttft) (time to first token) or
        V(tpot) (time per output token after the first).
    type: str
    choices: [e2e, ttft, tpot]
    default: e2e
  target_seconds:
    description:
      - The latency target, seconds, drawn as a dashed line in the lower panel.
    type: float
"""

EXAMPLES = r"""
- name: Before a long sweep, make sure the controller can draw its plot
  factory_floor.llm.concurrency_plot:
    check_only: true
  delegate_to: localhost

- name: Draw the sweep on the controller
  factory_floor.llm.concurrency_plot:
    levels: "{{ __sweep.levels }}"
    recommended: "{{ __sweep.recommendation.max_num_seqs }}"
    target_seconds: 60
    title: "spark-a: lab-chat"
    dest: "{{ playbook_dir }}/../build/tune-concurrency/spark-a.png"
    mode: "0644"
  delegate_to: localhost
"""

RETURN = r"""
dest:
  description: O(dest).
  returned: unless O(check_only)
  type: str
  sample: /srv/ff/build/tune-concurrency/spark-a.png
profiles:
  description: The profiles drawn, in the order of their first level.
  returned: unless O(check_only)
  type: list
  elements: str
  sample: [short, long]
size:
  description: Size of the PNG, bytes.
  returned: unless O(check_only)
  type: int
  sample: 48213
matplotlib_version:
  description: The version of matplotlib this host's Python imports (C(matplotlib.__version__)).
  returned: success
  type: str
  sample: 3.11.2
"""

import io
import os
import sys
import traceback

from ansible.module_utils.basic import AnsibleModule, missing_required_lib

try:
    import matplotlib
    matplotlib.use("Agg")
    from matplotlib import pyplot
except ImportError:
    pyplot = None
    MATPLOTLIB_IMPORT_ERROR = traceback.format_exc()
else:
    MATPLOTLIB_IMPORT_ERROR = None


def install_hint():
    """missing_required_lib's sentence, and how to install matplotlib for the Python that runs this module."""
    return "%s Install it for %s: '%s -m pip install matplotlib' (the collection's requirements.txt pins " \
        "matplotlib==3.11.2, and 'make venv' installs it), or 'apt-get install python3-matplotlib' when that is " \
        "Debian's or Ubuntu's python3." % (
            missing_required_lib("matplotlib", reason="to draw the concurrency sweep's PNG"), sys.executable,
            sys.executable)


_LATENCY_LABELS = {"e2e": "end-to-end latency", "ttft": "time to first token", "tpot": "time per output token"}


def series(levels, key):
    """profile -> ([concurrency...], [value...]) sorted by concurrency, levels without a value left out."""
    out = {}
    for row in levels:
        out.setdefault(row["profile"], [])
        if row.get(key) is not None:
            out[row["profile"]].append((int(row["concurrency"]), float(row[key])))
    return {p: ([c for c, v in sorted(points)], [v for c, v in sorted(points)]) for p, points in out.items()}


def render(levels, title, recommended=None, metric="e2e", target_seconds=None):
    """The PNG's bytes."""
    figure, (top, bottom) = pyplot.subplots(2, 1, figsize=(7, 7), sharex=True)
    try:
        throughput = series(levels, "tokens_per_s")
        latency = series(levels, metric + "_p95")
        for profile, (xs, ys) in throughput.items():
            top.plot(xs, ys, marker="o", label=profile)
        for profile, (xs, ys) in latency.items():
            bottom.plot(xs, ys, marker="o", label=profile)
        if target_seconds is not None:
            bottom.axhline(target_seconds, linestyle="--", color="grey", label="target %g s" % target_seconds)
        if recommended is not None:
            for axes in (top, bottom):
                axes.axvline(recommended, linestyle=":", color="black")
            # Right of the line, or left of it when the line is the last level (the label would leave the plot).
            last = recommended >= max(int(row["concurrency"]) for row in levels)
            top.annotate("max_num_seqs %d" % recommended, xy=(recommended, 0), xycoords=("data", "axes fraction"),
                         xytext=(-4 if last else 4, 6), textcoords="offset points", ha="right" if last else "left")
        ticks = sorted({int(row["concurrency"]) for row in levels})
        bottom.set_xticks(ticks)
        bottom.set_xlabel("concurrent requests")
        top.set_ylabel("tokens/s (completion)")
        bottom.set_ylabel("%s p95 (s)" % _LATENCY_LABELS[metric])
        top.set_ylim(bottom=0)
        bottom.set_ylim(bottom=0)
        for axes in (top, bottom):
            axes.grid(True, alpha=0.3)
            axes.legend(loc="best")
        figure.suptitle(title)
        figure.tight_layout()
        buffer = io.BytesIO()
        # No Software/date metadata: the same data gives the same bytes.
        figure.savefig(buffer, format="png", dpi=100, metadata={"Software": None})
        return buffer.getvalue()
    finally:
        pyplot.close(figure)


def main():
    module = AnsibleModule(
        argument_spec={
            "levels": {"type": "list", "elements": "dict"},
            "dest": {"type": "path"},
            "title": {"type": "str", "default": "Concurrency sweep"},
            "recommended": {"type": "int"},
            "metric": {"type": "str", "choices": ["e2e", "ttft", "tpot"], "default": "e2e"},
            "target_seconds": {"type": "float"},
            "check_only": {"type": "bool", "default": False},
        },
        required_if=[("check_only", False, ("levels", "dest"))],
        add_file_common_args=True,
        supports_check_mode=True,
    )
    if MATPLOTLIB_IMPORT_ERROR:
        module.fail_json(msg=install_hint(), exception=MATPLOTLIB_IMPORT_ERROR)
    params = module.params
    if params["check_only"]:
        module.exit_json(changed=False, matplotlib_version=matplotlib.__version__)
    for row in params["levels"]:
        if "profile" not in row or "concurrency" not in row:
            module.fail_json(msg="concurrency_plot: every level needs profile and concurrency (the sweep's levels); "
                                 "got %s" % sorted(row))
    dest = params["dest"]
    if not os.path.isdir(os.path.dirname(dest) or "."):
        module.fail_json(msg="concurrency_plot: the directory of dest %s does not exist" % dest)
    png = render(params["levels"], params["title"], params["recommended"], params["metric"], params["target_seconds"])
    try:
        with open(dest, "rb") as handle:
            changed = handle.read() != png
    except FileNotFoundError:
        changed = True
    except OSError as exc:
        module.fail_json(msg="concurrency_plot: reading %s failed: %s" % (dest, exc))
    if changed and not module.check_mode:
        tmp = dest + ".tmp"
        try:
            with open(tmp, "wb") as handle:
                handle.write(png)
            module.atomic_move(tmp, dest)
        except OSError as exc:
            module.fail_json(msg="concurrency_plot: writing %s failed: %s" % (dest, exc))
    if os.path.exists(dest):  # in check mode it only predicts
        changed = module.set_fs_attributes_if_different(module.load_file_common_arguments(params, path=dest), changed)
    profiles = list(dict.fromkeys(row["profile"] for row in params["levels"]))
    module.exit_json(changed=changed, dest=dest, profiles=profiles, size=len(png), matplotlib_version=matplotlib.__version__)


if __name__ == "__main__":
    main()

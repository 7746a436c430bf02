# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""factory_floor.llm.tool_gate_scores, on the controller: look up or store the tool gate's scores there.

The scores live on the controller (``tool_gate_store_dir``), whichever host ran the test; this plugin reads and
writes them itself and never connects to the host. ``state: spread`` writes every play host's ``tool_gate_spread``,
which it reads from ``hostvars``. The logic is ``plugins/module_utils/_tool_gate_scores.py``'s;
the documentation is ``plugins/modules/tool_gate_scores.py``'s.
"""

from __future__ import annotations

import os
import tempfile

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

from ansible_collections.factory_floor.llm.plugins.module_utils import _tool_gate_scores as ts
from ansible_collections.factory_floor.llm.plugins.plugin_utils._variables import plain

ARGUMENT_SPEC = dict(
    state=dict(type="str", required=True, choices=["lookup", "store", "spread"]),
    store_dir=dict(type="path"),
    build_id=dict(type="str"),
    suite_digest=dict(type="str"),
    id_chars=dict(type="int", default=16),
    path=dict(type="path"),
    build=dict(type="dict"),
    run=dict(type="dict"),
    host=dict(type="str"),
    role=dict(type="str", choices=["incumbent", "candidate"]),
    passed=dict(type="bool"),
)
NEEDS = {"lookup": ("store_dir", "build_id", "suite_digest"), "store": ("path", "build", "run", "host", "role"),
         "spread": ("path",)}
SPREAD_FACT = "tool_gate_spread"


def store(path, content, check_mode=False):
    """Write ``content`` at ``path`` (its directory made when missing); whether it changed."""
    if os.path.isfile(path):
        with open(path, encoding="utf-8") as handle:
            if handle.read() == content:
                return False
    if check_mode:
        return True
    os.makedirs(os.path.dirname(path) or ".", mode=0o755, exist_ok=True)
    handle, temp = tempfile.mkstemp(dir=os.path.dirname(path) or ".")
    with os.fdopen(handle, "w", encoding="utf-8") as out:
        out.write(content)
    os.chmod(temp, 0o644)
    os.replace(temp, path)
    return True


class ActionModule(ActionBase):
    """Looks up or stores a score on the controller; its documentation is the module's."""

    _supports_check_mode = True
    _requires_connection = False
    TRANSFERS_FILES = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp  # tmp no longer has any effect
        _validation, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        missing = [name for name in NEEDS[args["state"]] if args[name] is None]
        if missing:
            raise AnsibleActionFail("tool_gate_scores %s needs %s" % (args["state"], ", ".join(missing)))
        if args["state"] == "lookup":
            try:
                found = ts.lookup(args["store_dir"], args["build_id"], args["suite_digest"], args["id_chars"])
            except (OSError, ValueError, KeyError, TypeError) as error:
                raise AnsibleActionFail("Could not read the tool gate's scores in %s: %s" % (args["store_dir"], error))
            result.update(changed=False, found=found)
            return result
        if args["state"] == "spread":
            hostvars = (task_vars or {}).get("hostvars") or {}
            one = {host: plain(hostvars[host].get(SPREAD_FACT)) if host in hostvars else None
                   for host in (task_vars or {}).get("ansible_play_hosts") or []}
        else:
            one = ts.record(args["build"], args["run"], args["host"], args["role"], args["passed"])
        try:
            changed = store(args["path"], ts.text(one), self._task.check_mode)
        except OSError as error:
            raise AnsibleActionFail("Could not store the tool gate's score at %s: %s" % (args["path"], error))
        result.update(changed=changed, path=args["path"], record=one)
        return result

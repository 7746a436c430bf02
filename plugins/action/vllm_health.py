# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""factory_floor.llm.vllm_health in runs that report: each run's progress lines printed as it goes (see plugin_utils/_progress.py).

With ``engine_host``, the plugin reads that engine host's endpoint from ``hostvars`` on the
controller (``_host_inputs.engine_endpoint``: its own URL, key and served model name) and gives it
to the module as ``url``, ``api_key`` and ``model``, in place of the task's (or module_defaults').
"""

from __future__ import annotations

from ansible.errors import AnsibleActionFail

from ansible_collections.factory_floor.llm.plugins.module_utils._host_inputs import engine_endpoint
from ansible_collections.factory_floor.llm.plugins.plugin_utils._progress import ProgressAction
from ansible_collections.factory_floor.llm.plugins.plugin_utils._variables import plain


class ActionModule(ProgressAction):
    """Runs the module factory_floor.llm.vllm_health; its documentation is the module's."""

    # When the wait ended, on the controller's clock (the module's RETURN ended_at).
    controller_stamps = ("ended_at",)

    def module_args(self, task_vars):
        args = super().module_args(task_vars)
        host = args.pop("engine_host", None)
        if host is None:
            return args
        try:
            endpoint = plain(engine_endpoint((task_vars or {}).get("hostvars") or {}, host))
        except ValueError as exc:
            raise AnsibleActionFail(str(exc)) from exc
        for name in ("url", "api_key", "model"):
            args.pop(name, None)
        args.update(endpoint)
        return args

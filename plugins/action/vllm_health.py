# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""factory_floor.llm.vllm_health in runs that report: each run's progress lines printed as it goes (see plugin_utils/_progress.py)."""

from __future__ import annotations

from ansible_collections.factory_floor.llm.plugins.plugin_utils._progress import ProgressAction


class ActionModule(ProgressAction):
    """Runs the module factory_floor.llm.vllm_health; its documentation is the module's."""

    # When the wait ended, on the controller's clock (the module's RETURN ended_at).
    controller_stamps = ("ended_at",)

# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""deploy.yml's last step on a proxy host: engines it expects in rotation that another holder drained. Pure logic.

deploy.yml waits until every engine that serves the API is in each proxy's rotation. An engine drained by another
holder than ``deploy`` (an interrupted switch or model upgrade, an operator's drain file) would never rejoin: the
run stops at once, naming each holder and how to go on, instead of waiting in vain.
"""

from __future__ import annotations

from ansible_collections.factory_floor.llm.plugins.module_utils._playbook_name import playbook_name

HOLDER = "deploy"


def drained_other(drained, expected, holder=HOLDER):
    """``[(engine, holder)]``: the engines of ``expected`` that ``drained`` (engine -> holder, "" for none; the
    nginx_proxy role's ``nginx_proxy_drained``) lists under another holder than ``holder``, in ``drained``'s order."""
    expected = set(expected or ())
    return [(engine, who) for engine, who in (drained or {}).items() if who != holder and engine in expected]


def refusal(drained, expected, host, check_mode=False, playbook_dir=None):
    """The message that stops deploy.yml on the proxy host ``host``, or "" when no expected engine is drained by
    another holder."""
    others = drained_other(drained, expected)
    if not others:
        return ""
    listed = ", ".join("%s (drained by: %s)" % (engine, who or "no holder") for engine, who in others)
    return ("Drained from the proxy on %s, so not in its rotation: %s. Drained by switch-to-replicas or switch-to-split: "
            "that switch was interrupted before its tool-calling gate's verdict; run it again (%s or %s), which gates "
            "them and puts them back. By switch-model: run %s again. No holder: an operator's drain; remove "
            "/etc/factory-floor/drain/NAME on the proxy host when the engine may serve again. %s"
            % (host, listed, playbook_name("switch-to-replicas.yml", playbook_dir),
               playbook_name("switch-to-split.yml", playbook_dir), playbook_name("switch-model.yml", playbook_dir),
               "A real run would deploy everything else and stop here the same way (--check changed nothing)."
               if check_mode else "Everything else is deployed."))

# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The rolling restart's words after a replica's restart failed (the ``rolling_restart`` role, ``deploy.yml``), and
the last measured start-up its decision reads.

Who carries the load and whether to go are ``_restart_plan``'s; this is the sentence the run stops with.
"""

from __future__ import annotations

import base64
import binascii
import json

from ansible_collections.factory_floor.llm.plugins.module_utils._playbook_name import playbook_name
from ansible_collections.factory_floor.llm.plugins.module_utils._restart_plan import UNIT, truncate

# Where the maintenance window records this host's last measured start-ups (its record_startup entry point).
STARTUP_FILE = "/var/lib/factory-floor/startup.json"


def read_startup(slurped):
    """The start-ups (seconds by topology) in ``slurped``, ``ansible.builtin.slurp``'s result for the startup file;
    ``{}`` when the host has none, it could not be read, or it holds no JSON object (the announcement then names
    GB10's range)."""
    if not isinstance(slurped, dict) or slurped.get("failed") or not slurped.get("content"):
        return {}
    try:
        record = json.loads(base64.b64decode(slurped["content"]).decode("utf-8"))
    except (binascii.Error, UnicodeDecodeError, ValueError, TypeError):
        return {}
    return record if isinstance(record, dict) else {}


def failure_message(host, change, error="", carriers=(), unit=UNIT, playbook_dir=None):
    """Why the rolling restart stops at ``host`` (restarted for ``change``, failing with ``error``): who still
    serves (``carriers``), that the others keep their old configuration, and what to do."""
    error = truncate(error, 600) if error else ""
    carried = "The other replicas (%s) serve. " % ", ".join(carriers) if carriers else ""
    return ("The restart of %s for its new configuration (%s) failed: %s %sThe replicas not restarted yet keep their "
            "old configuration. Fix the cause (journalctl -u %s on %s) and run %s again; %s is off the drain list and "
            "rejoins the proxy by itself once it serves."
            % (host, change, error or "see the failed task above.", carried, unit, host,
               playbook_name("deploy.yml", playbook_dir), host))

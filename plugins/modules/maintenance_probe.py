#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: maintenance_probe
short_description: Start the probe client that asks the model through the proxy during a switch or an upgrade
version_added: 0.1.0
description:
  - On a proxy host, stops the probe client an interrupted run left behind (C(systemctl stop) of O(unit); one that is
    not there is no failure), then, with O(start), removes the last run's log (O(log)) and starts this run's client as
    the transient unit O(unit) (C(systemd-run --collect), stopped by systemd after O(max_seconds)).
  - The client (the collection's C(_host.probe_client), run as C(python3 -m) from O(lib_dir)) asks O(model) at O(url)
    every O(interval) seconds with O(concurrency) requests at once and writes one JSON line per request to O(log);
    M(factory_floor.llm.switch_report) reads it. The API key is read from O(api_key_file), never on a command line.
  - An action plugin runs C(ansible.builtin.command) and C(ansible.builtin.file) on the host; the steps are
    C(plugins/module_utils/_maintenance_window.py)'s C(probe_steps). Used by the C(probe) entry point of the
    C(factory_floor.llm.maintenance_window) role.
author:
  - Factory Floor maintainers (@factory-floor)
extends_documentation_fragment:
  - factory_floor.llm.attributes
attributes:
  check_mode:
    support: full
    details: Stops nothing and starts nothing; predicts the removal of the log and reports the start as a change.
  diff_mode:
    support: none
  idempotent:
    support: none
    details: Every run starts a new client.
options:
  unit:
    description: The transient unit's name, without C(.service) (the role's C(_maintenance_window_probe_unit)).
    type: str
    required: true
  start:
    description: Start this run's client; V(false) only stops one an interrupted run left behind (C(maintenance_window_probe_start)).
    type: bool
    default: true
  log:
    description: Path on the host of the client's JSON-lines log, removed before it starts (C(_maintenance_window_probe_log)).
    type: str
    required: true
  url:
    description: The proxy's chat completions URL the client asks (C(_maintenance_window_probe_url)).
    type: str
    default: ""
  model:
    description: The served model name the client asks for; by default O(engine_host)'s C(vllm_served_model_name).
    type: str
  engine_host:
    description:
      - Without O(model), the engine host (inventory name) whose C(vllm_served_model_name) the client asks for, read by
        the action plugin from C(hostvars) when the client starts; the task fails when it is not defined there.
    type: str
    default: ""
  interval:
    description: Seconds between requests (C(maintenance_window_probe_interval)).
    type: raw
    default: 0.5
  concurrency:
    description: Requests at once (C(maintenance_window_probe_concurrency)).
    type: raw
    default: 2
  max_seconds:
    description: Seconds after which systemd stops the client if the run never does (C(maintenance_window_probe_max_seconds)).
    type: raw
    default: 7200
  lib_dir:
    description: The directory holding the host programs' C(_host) package, the client's C(PYTHONPATH) (C(_site_host_lib_dir)).
    type: str
    default: ""
  api_key_file:
    description: The root-only file the client reads the engines' API key from (C(maintenance_window_api_key_file)).
    type: str
    default: ""
  ca_file:
    description: The CA file the client checks the proxy's TLS certificate with; empty for plain HTTP (C(nginx_proxy_tls_ca_file)).
    type: str
    default: ""
seealso:
  - module: factory_floor.llm.switch_report
"""

EXAMPLES = r"""
- name: Stop a probe client an interrupted run left behind, and start this run's
  factory_floor.llm.maintenance_probe:
    unit: factory-floor-switch-probe
    log: /run/factory-floor/switch-probe.jsonl
    url: http://gateway:8080/v1/chat/completions
    engine_host: spark-a
    lib_dir: /usr/local/lib/factory-floor
    api_key_file: /etc/factory-floor/client-api-key
"""

RETURN = r"""
changed:
  description: The log was removed or the client started (in check mode, would be).
  returned: always
  type: bool
started:
  description: C(ansible.builtin.command)'s result of C(systemd-run); null when nothing was started (O(start=false), check mode).
  returned: always
  type: dict
"""

# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The collection's host programs, and the code they share with its modules.

Private to the collection. Standard library only (``requests`` and ``prometheus_client``
behind their own import guards), and nothing here imports Ansible: the modules in this
package import each other relatively, so the package runs the same inside the collection
(the modules import it as ``ansible_collections.factory_floor.llm.plugins.module_utils._host``)
and on a host, where the ``site`` role's entry point ``host_programs`` copies every file of
it to ``/usr/local/lib/factory-floor/_host/`` and the units run one program with::

    PYTHONPATH=/usr/local/lib/factory-floor /usr/bin/python3 -m _host.<program> ...

The programs (each has ``main()``):

* ``watchdog``: the engines' watchdog (role ``vllm_watchdog``);
* ``upstream``: the proxy's membership checker (role ``nginx_proxy``);
* ``keepalived``: keepalived's engines check; ``keepalived_watch``: the floating
  address's watch (role ``keepalived``);
* ``memory_guard``: the engines' start check; ``memory_guard_watch``: the memory watch
  (role ``memory_guard``);
* ``probe_client``: the client that asks the model through the proxy during a
  maintenance run (role ``maintenance_window``, and the scenarios' verify steps).

The rest is their shared code: ``daemon`` (the shell every daemon shares), ``systemd``,
``proc``, ``textfile``, ``vllm_client``, ``vllm_health``, ``vllm_metrics``, ``memory``,
``maintenance_lock``, the watchdog's ``watchdog_config`` and ``watchdog_judge``, the memory
watch's ``memory_guard_judge``, and ``load`` (the load generator of the concurrency sweep
and of ``benchmarks/``).
"""

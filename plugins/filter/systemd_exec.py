# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: systemd_exec
short_description: An ExecStart= value that passes a command line to the program unchanged
version_added: 0.1.0
description:
  - systemd changes a command line on its way to the program (systemd.service(5), "Command lines") - it expands C(%)
    specifiers (C(%h) is a home directory), unescapes C escapes (C(\\b) becomes a backspace, inside single quotes too)
    and substitutes C($VAR) and C(${VAR}). Shell quoting (the C(quote) filter) protects from none of these.
  - This filter writes each argument that is not plain in double quotes, with C(\\) and C(") escaped, C(%) doubled and
    control characters as C escapes, and starts the line with the C(:) prefix, which turns environment variable
    substitution off for the command (systemd 249 and later; Debian 12 has 252, Ubuntu 24.04 255). The words systemd
    passes to the program are then exactly the list given.
  - Fails for an empty list or an argument holding a NUL character.
options:
  _input:
    description: The command line, the program first (an absolute path).
    type: list
    elements: str
    required: true
"""

EXAMPLES = r"""
- name: The engine's unit runs exactly the rendered command line
  ansible.builtin.template:
    src: vllm.service.j2   # ExecStart={{ __vllm_argv | factory_floor.llm.systemd_exec }}
    dest: /etc/systemd/system/vllm-replica.service
    owner: root
    group: root
    mode: "0644"

- name: What it writes
  ansible.builtin.debug:
    msg: "{{ ['/usr/bin/vllm', 'serve', '/models/m', '--served-model-name', 'qwen 100%'] | factory_floor.llm.systemd_exec }}"
  # -> :/usr/bin/vllm serve /models/m --served-model-name "qwen 100%%"
"""

RETURN = r"""
_value:
  description: The value for C(ExecStart=) (or C(ExecStartPre=), C(ExecStop=)), the C(:) prefix first.
  type: str
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.factory_floor.llm.plugins.module_utils._vllm_args import VllmArgsError, systemd_exec_line


def systemd_exec(argv):
    """Filter entry point."""
    if not isinstance(argv, (list, tuple)):
        raise AnsibleFilterError("systemd_exec expects a list of arguments, got %s" % type(argv).__name__)
    try:
        return systemd_exec_line(argv)
    except VllmArgsError as exc:
        raise AnsibleFilterError("systemd_exec: %s" % exc) from exc


class FilterModule:
    """systemd filters."""

    def filters(self):
        return {"systemd_exec": systemd_exec}

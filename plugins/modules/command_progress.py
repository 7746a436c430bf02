#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: command_progress
short_description: Run a long command and print the progress lines it writes to stderr while it runs
version_added: 0.1.0
description:
  - "Runs O(argv) on the host (no shell) in the background and, while it runs, prints at the default verbosity every line
    it writes to its standard error, prefixed with the inventory host - its progress (the benchmarks' C(arm n of N: ...)
    lines). Its standard output is its result, returned when it ends, as C(ansible.builtin.command) returns it."
  - The module's action plugin runs the module once every O(progress_interval) seconds; each run prints the new lines
    and goes on (O(resume)); the task's result is the last run's, when the command has ended.
  - The command runs in a session of its own under a small Python wrapper, with its output in a private directory under
    the temporary directory (removed when it ends); a controller that goes away (Ctrl-C, a lost connection) does not
    stop it. Past O(timeout) it is stopped, with its children (SIGTERM to its process group, SIGKILL 10 s later).
  - Fails when the command exits with a status other than 0, or cannot start.
author:
  - Factory Floor maintainers (@factory-floor)
extends_documentation_fragment:
  - factory_floor.llm.attributes
attributes:
  check_mode:
    support: partial
    details: In check mode the command does not run; the module returns RV(ignore:skipped=true).
  diff_mode:
    support: none
  idempotent:
    support: none
    details: It runs the command every time; the result reports RV(ignore:changed=true), as C(ansible.builtin.command).
options:
  argv:
    description:
      - The command and its arguments, run as they are (no shell).
    type: list
    elements: str
    required: true
  chdir:
    description:
      - The directory the command runs in. Default, the module's own.
    type: path
  timeout:
    description:
      - Seconds the command may run, from its start; past them it is stopped and the task fails. V(0) - no bound.
    type: float
    default: 0
  progress_interval:
    description:
      - Seconds between two runs of the module, each printing the stderr lines written meanwhile (complete lines).
      - V(0) waits for the end in one run and prints them all then.
    type: float
    default: 30
  resume:
    description:
      - Internal, set by the action plugin - what the previous run returned in the C(resume) of RV(progress) (the private
        directory, the process group, what was printed).
    type: dict
notes:
  - A task with C(async) runs the module once in the background, with no progress lines, as any module.
seealso:
  - module: ansible.builtin.command
"""

EXAMPLES = r"""
- name: Run the balance benchmark on the proxy host, its "arm n of N" lines printed as it goes
  factory_floor.llm.command_progress:
    argv: [/usr/bin/python3, /usr/local/lib/factory-floor-bench/balance.py, --duration=120]
    timeout: 14400
  register: bench
  changed_when: false
"""

RETURN = r"""
rc:
  description: The command's exit status; negative for a signal (-15 when a timeout stopped it with SIGTERM, -9 SIGKILL).
  returned: when the command ended
  type: int
  sample: 0
stdout:
  description: Its standard output.
  returned: when the command ended
  type: str
stdout_lines:
  description: RV(stdout) split into lines.
  returned: when the command ended
  type: list
  elements: str
stderr:
  description: Its standard error (its last 20,000 characters), every line of which was printed as progress.
  returned: when the command ended
  type: str
stderr_lines:
  description: RV(stderr) split into lines.
  returned: when the command ended
  type: list
  elements: str
cmd:
  description: O(argv).
  returned: always
  type: list
  elements: str
elapsed:
  description: Seconds from the command's start to its end (the host's clock).
  returned: when the command ended
  type: float
  sample: 1012.4
progress:
  description:
    - C(done) (false while the command runs), C(lines) (the stderr lines written since the previous run, for the action
      plugin to print) and, while it runs, C(resume) (passed back as O(resume)).
  returned: always, but in check mode
  type: dict
  sample:
    done: false
    lines: ["arm 3 of 8: capacity, spark-a alone (12 clients)"]
    resume: {dir: /tmp/factory-floor-command-3k2j1, pid: 81234, offset: 812, started: 1795957165.2}
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.factory_floor.llm.plugins.module_utils import _command_progress as command


def main():
    module = AnsibleModule(
        argument_spec=dict(
            argv=dict(type="list", elements="str", required=True),
            chdir=dict(type="path"),
            timeout=dict(type="float", default=0),
            progress_interval=dict(type="float", default=30),
            resume=dict(type="dict"),
        ),
        supports_check_mode=True,
    )
    params = module.params
    argv = params["argv"]
    if module.check_mode:
        module.exit_json(changed=False, skipped=True, cmd=argv, msg="check mode: the command was not run")
    for name in ("timeout", "progress_interval"):
        if params[name] < 0:
            module.fail_json(msg="%s must be 0 or more seconds, got %s" % (name, params[name]), cmd=argv)
    try:
        state = params["resume"] or command.start(argv, chdir=params["chdir"])
        seen = command.look(state, params["progress_interval"] if params["progress_interval"] > 0 else float("inf"),
                            timeout=params["timeout"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        module.fail_json(msg="Could not run or follow %s: %s" % (" ".join(argv), exc), cmd=argv)
    if not seen["done"]:
        module.exit_json(changed=True, cmd=argv, progress={"done": False, "lines": seen["lines"], "resume": seen["state"]})
    result = dict(changed=True, cmd=argv, rc=seen["rc"], stdout=seen["stdout"], stdout_lines=seen["stdout"].splitlines(),
                  stderr=seen["stderr"], stderr_lines=seen["stderr"].splitlines(), elapsed=seen["elapsed"],
                  progress={"done": True, "lines": seen["lines"]})
    if seen["rc"] != 0 or seen["error"]:
        module.fail_json(msg="%s %s after %ss%s" % (
            " ".join(argv), "exited with status %s" % seen["rc"] if not seen["error"] else "failed: " + seen["error"],
            seen["elapsed"], "; its last stderr line: " + seen["stderr"].strip().splitlines()[-1]
            if seen["stderr"].strip() else ""), **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()

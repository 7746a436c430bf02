# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""ExecStart= lines that pass a command line to the program unchanged (_vllm_args.systemd_exec_line).

The oracle is systemd's own parser (``systemd --test``, tests/unit/plugins/systemd_dump.py):
what the inventory says must be what vLLM gets, whatever it holds.
"""

from __future__ import annotations

import pytest

from ansible_collections.factory_floor.llm.plugins.module_utils._vllm_args import VllmArgsError, systemd_exec_line
from ansible_collections.factory_floor.llm.tests.unit.plugins import systemd_dump

needs_systemd = pytest.mark.skipif(not systemd_dump.AVAILABLE, reason=systemd_dump.WHY_NOT)

ADVERSARIAL = ["a\\b", "${HOME}", "$x", "$$x", "%h", "%%h", "100%", '"q"', "'s'", "it's", "sp ace", "x\ny",
               "tab\there", ";", "", "\\", "\\n", "a\\x41", "--opt=${x}", "`id`", "\x01ctl", "é", "--served-model-name",
               "qwen/Qwen3 (1.5)", "#not-a-comment", "{\"method\":\"mtp\",\"num_speculative_tokens\":4}", "\\\\server"]
PROGRAM = ["/opt/vllm/bin/vllm", "serve", "/models/m"]


def _unit(line):
    return "[Unit]\nDescription=argv\n[Service]\nType=simple\nExecStart=%s\n" % line


@needs_systemd
@pytest.mark.parametrize("value", ADVERSARIAL, ids=[repr(v) for v in ADVERSARIAL])
def test_systemd_passes_each_value_unchanged(value):
    argv = PROGRAM + ["--served-model-name", value]
    assert systemd_dump.exec_start(_unit(systemd_exec_line(argv))) == argv


@needs_systemd
def test_systemd_passes_them_all_in_one_line():
    argv = PROGRAM + ADVERSARIAL
    assert systemd_dump.exec_start(_unit(systemd_exec_line(argv))) == argv


@needs_systemd
def test_a_program_path_with_a_space():
    argv = ["/opt/my vllm/bin/vllm", "serve", "/models/m"]
    assert systemd_dump.exec_start(_unit(systemd_exec_line(argv))) == argv


@needs_systemd
def test_shell_quoting_as_the_role_did_changes_values():
    """The role's former rendering (the quote filter, % doubled): systemd turned 'a\\b' into a backspace."""
    import shlex
    argv = PROGRAM + ["a\\b", "tab\\there"]
    line = " ".join(shlex.quote(word) for word in argv).replace("%", "%%")
    assert systemd_dump.exec_start(_unit(line)) == PROGRAM + ["a\b", "tab\there"]


def test_plain_words_stay_readable():
    assert systemd_exec_line(PROGRAM + ["--port", "8000", "--host", "0.0.0.0", "--kv-cache-dtype", "fp8"]) == \
        ":/opt/vllm/bin/vllm serve /models/m --port 8000 --host 0.0.0.0 --kv-cache-dtype fp8"
    assert systemd_exec_line(["/usr/bin/docker", "run", "--env-file", "/etc/factory-floor/vllm-replica.service.env",
                              "--volume=/models/m:/models/m:ro", "--gpus=all"]) == (
        ":/usr/bin/docker run --env-file /etc/factory-floor/vllm-replica.service.env --volume=/models/m:/models/m:ro "
        "--gpus=all")


def test_what_is_escaped():
    assert systemd_exec_line(["/bin/p", "a\\b", '"', "50%", "x\ny", "$HOME", ""]) == \
        ':/bin/p "a\\\\b" "\\"" "50%%" "x\\ny" "$HOME" ""'


@pytest.mark.parametrize("argv", [[], ["/bin/p", "a\0b"]])
def test_what_no_command_line_can_hold(argv):
    with pytest.raises(VllmArgsError):
        systemd_exec_line(argv)

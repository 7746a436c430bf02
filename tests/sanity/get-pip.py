"""Offline stand-in for pip's get-pip.py, for ansible-test's virtualenv bootstrap.

ansible-test downloads get-pip.py from a host that this project's machines cannot
reach (only package registries are reachable). `make sanity` puts this file where
ansible-test caches that download (in a private HOME under build/), and it does
the same job: install pip into the new virtualenv (from Python's bundled copy,
then the requested version from PyPI) with the arguments get-pip.py would get.
"""

import subprocess
import sys

args = [arg for arg in sys.argv[1:] if arg not in ("--no-setuptools", "--no-wheel")]
subprocess.check_call([sys.executable, "-m", "ensurepip", "--default-pip"])
if args:
    subprocess.check_call([sys.executable, "-m", "pip", "install"] + args)

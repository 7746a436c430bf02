"""Molecule memory scenario: a "database" that holds 200 MiB (written, so resident) and waits."""
import time

HELD = b"d" * (200 << 20)
while True:
    time.sleep(3600)

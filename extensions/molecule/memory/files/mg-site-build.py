"""Molecule memory scenario: a "site build" that grows by 60 MiB a second to GROW_TO_MIB, then holds it."""
import os
import time

TARGET = int(os.environ.get("GROW_TO_MIB", "600"))
STEP = 60
chunks = []
held = 0
while held < TARGET:
    size = min(STEP, TARGET - held)
    chunks.append(b"b" * (size << 20))
    held += size
    time.sleep(1)
while True:
    time.sleep(3600)

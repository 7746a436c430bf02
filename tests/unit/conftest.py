"""Make ``ansible_collections.factory_floor.llm`` importable for unit tests.

``make units`` runs pytest with the collection linked under build/collections;
this also covers running pytest directly from the repository root.
"""

import os
import sys

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_COLLECTIONS = os.path.join(_ROOT, "build", "collections")
_LINK = os.path.join(_COLLECTIONS, "ansible_collections", "factory_floor", "llm")
if not os.path.exists(_LINK):
    os.makedirs(os.path.dirname(_LINK), exist_ok=True)
    os.symlink(_ROOT, _LINK)
if _COLLECTIONS not in sys.path:
    sys.path.insert(0, _COLLECTIONS)

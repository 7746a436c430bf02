# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The HTTP basics every reader of a vLLM engine shares: the ``requests`` guard, no
environment proxies, the API key header, one JSON GET.

Standard library and ``requests`` only; the daemons load it from next to themselves.
It owns its import guard, so nothing here imports back from a caller.
"""

from __future__ import annotations

import traceback

try:
    import requests
except ImportError:
    requests = None
    HAS_REQUESTS = False
    REQUESTS_IMPORT_ERROR = traceback.format_exc()
else:
    HAS_REQUESTS = True
    REQUESTS_IMPORT_ERROR = None


def no_proxies() -> dict:
    """Per-request ``proxies`` that switch off HTTP_PROXY, HTTPS_PROXY and ALL_PROXY.

    A reader of an engine has to reach the engine itself, not whatever a proxy answers
    for it. requests adds environment proxies to the dict it is given, so every request
    gets a fresh one.
    """
    return {"http": None, "https": None, "all": None}


def headers(api_key: str | None, accept: str = "application/json", **extra) -> dict:
    """Request headers: ``Accept``, the API key as a bearer token when there is one, and ``extra``."""
    values = {"Accept": accept}
    values.update(extra)
    if api_key:
        values["Authorization"] = "Bearer %s" % api_key
    return values


def require() -> None:
    """Raise RuntimeError naming the missing library when ``requests`` cannot be imported."""
    if requests is None:
        raise RuntimeError("the Python library requests is required: %s" % REQUESTS_IMPORT_ERROR)


def get_json(url: str, timeout: float) -> dict:
    """GET ``url`` and return its JSON object; raises on a transport error, a status other than 2xx or other JSON."""
    require()
    response = requests.get(url, timeout=timeout, proxies=no_proxies(), allow_redirects=False)
    response.raise_for_status()
    data = response.json()
    if not isinstance(data, dict):
        raise ValueError("GET %s did not answer a JSON object" % url)
    return data

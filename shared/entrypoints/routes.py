"""Route values as the caller meant them."""

from __future__ import annotations

import re

import azure.functions as func

_ENCODED_SLASH = re.compile("%2F", re.IGNORECASE)


def route_value(req: func.HttpRequest, name: str) -> str:
    """The host decodes route values as ASP.NET Core does: every escape but ``%2F``, so that an
    encoded '/' cannot change the route. Session and job ids may hold '/', so it is decoded
    here; decoding everything again would turn an id's literal ``%41`` into ``A``."""
    return _ENCODED_SLASH.sub("/", req.route_params[name])

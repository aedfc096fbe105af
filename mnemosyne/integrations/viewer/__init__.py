"""A local, read-only browser viewer of a store (``mnemo ui``), on the public API only.

Needs the ``ui`` extra (Jinja2, Starlette, uvicorn); :func:`build_app` gives the
ASGI app, which ``mnemo ui`` serves on the loopback address.
"""

from mnemosyne.integrations.viewer.app import build_app

__all__ = ["build_app"]

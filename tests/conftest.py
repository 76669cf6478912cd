"""Suite-wide setup."""

from __future__ import annotations

import os

# Starlette's TestClient sends `Host: testserver`; the server refuses Hosts it is not reached by (DNS rebinding),
# so in-process tests name it the way an operator names a host (docs/operating.md). Subprocess servers started by
# tests/hardening/util.py drop it again.
os.environ.setdefault("LAYERSCOPE_ALLOWED_HOSTS", "testserver")

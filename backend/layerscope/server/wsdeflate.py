"""permessage-deflate tuned for LayerScope's frames, for `serve --ws-compression`.

uvicorn's websocket protocol offers deflate with a 4 KB window (server_max_window_bits=12), which suits chat
messages but not frames of ~400-byte JSON events that repeat field names and kernel names: on a playback of
`long-context-128k` it deflates ~47 MB/s at a 4.2x ratio, where a 32 KB window (the RFC 7692 default) with zlib
level 1 does ~115 MB/s at 9.6x. The server compresses every frame once per viewer, so that is the server's CPU.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

log = logging.getLogger("layerscope.server")
COMPRESS_SETTINGS = {"level": 1, "memLevel": 5}  # memLevel 5: a 32 KB hash table per viewer instead of 256 KB


def deflate_protocol() -> type[asyncio.Protocol] | str:
    """uvicorn's websockets (sans-I/O) protocol with the deflate settings above; "auto" when this uvicorn has no
    such protocol (older versions), which still compresses, with uvicorn's own settings."""
    try:
        from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol
        from websockets.extensions.permessage_deflate import ServerPerMessageDeflateFactory
        from websockets.server import ServerProtocol
    except ImportError:
        log.info("this uvicorn has no sans-I/O websocket protocol: deflate with its default settings")
        return "auto"

    class TunedDeflateProtocol(WebSocketsSansIOProtocol):
        def __init__(self, config: Any, *args: Any, **kwargs: Any) -> None:
            super().__init__(config, *args, **kwargs)
            if config.ws_per_message_deflate:  # replace the handshake state machine before any byte arrives
                factory = ServerPerMessageDeflateFactory(compress_settings=dict(COMPRESS_SETTINGS))
                uv_log = logging.getLogger("uvicorn.error")
                self.conn = ServerProtocol(extensions=[factory], max_size=config.ws_max_size, logger=uv_log)

    return TunedDeflateProtocol

"""External SDR SDRAM: the chip's description (``chip``), its pins and commands (``bus``)
and the controller (``controller``)."""

from .bus import Command, SdramBusSignature, decode_mode_register, mode_register
from .chip import ULX3S_SDRAM, SdramChip, SdramCycles, SdramGeometry, SdramTiming
from .controller import (SdramController, refresh_period, request_layout,
                         sequential_read_efficiency)

__all__ = ["Command", "SdramBusSignature", "decode_mode_register", "mode_register",
           "ULX3S_SDRAM", "SdramChip", "SdramCycles", "SdramGeometry", "SdramTiming",
           "SdramController", "refresh_period", "request_layout",
           "sequential_read_efficiency"]

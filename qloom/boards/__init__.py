"""Board descriptions: device budget, clocks, host link and programmer, on top of
amaranth-boards platforms."""

from .board import Board, Device, Family, Resources
from .catalog import BOARDS, get_board

__all__ = ["Board", "Device", "Family", "Resources", "BOARDS", "get_board"]

"""Board descriptions: device budget, clocks, host link and programmer, on top of
amaranth-boards platforms."""

from .board import Board, Family, Resources
from .catalog import BOARDS, get_board

__all__ = ["Board", "Family", "Resources", "BOARDS", "get_board"]

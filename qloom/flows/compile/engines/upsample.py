"""Nearest-neighbour upsampling of channels-last pixel streams."""

from __future__ import annotations

from qloom.flows.compile.engines.base import PixelEngine

__all__ = ["UpsampleEngine"]


class UpsampleEngine(PixelEngine):
    kind = "upsample"

    def unit(self, lanes: int):
        """The template for ``lanes`` lanes."""
        from qloom.hw.upsample import Upsample as UpsampleUnit
        return UpsampleUnit(in_h=self.in_h, in_w=self.in_w, channels=self.channels,
                            scale=tuple(self.layer.scale), dtype=self.dtype, lanes=lanes)

    def input_needed(self):
        from qloom.hw.upsample import input_words_needed
        return (input_words_needed(in_h=self.in_h, in_w=self.in_w, words=self.channels,
                                   scale=tuple(self.layer.scale)),)

    def cycles(self, fold):
        return self._asked(fold.pe).cycles_per_frame

    @property
    def out_bits(self) -> int:
        return self.dtype.bits

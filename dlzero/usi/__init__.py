"""USI front end: the protocol loop (`protocol`) and its options (`options`)."""

from dlzero.usi.protocol import UsiEngine, main

__all__ = ["UsiEngine", "main"]

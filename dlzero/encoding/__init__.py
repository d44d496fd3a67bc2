"""Encoding: positions to input planes, moves to policy indices (and back)."""

from dlzero.encoding.features import (
    ENCODER_VERSION,
    NUM_PLANES,
    Encoder,
    encode_position,
    input_key,
    new_batch_buffer,
    repetition_count,
)
from dlzero.encoding.labels import (
    NUM_LABELS,
    label_to_move,
    labels_of,
    legal_label_mask,
    legal_moves_and_labels,
    move_to_label,
)

__all__ = [
    "ENCODER_VERSION",
    "NUM_LABELS",
    "NUM_PLANES",
    "Encoder",
    "encode_position",
    "input_key",
    "label_to_move",
    "labels_of",
    "legal_label_mask",
    "legal_moves_and_labels",
    "move_to_label",
    "new_batch_buffer",
    "repetition_count",
]

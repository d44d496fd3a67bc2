"""Data files: hcp/hcpe/hcpe3 formats, record import, atomic writes.

Formats are dlshogi's, so its tools read our data and we read theirs. Readers validate and raise
`dlzero.errors.DataError` naming the file and byte offset; writers are atomic, so a killed process
never leaves a torn file where a reader can see it.
"""

from dlzero.data.atomic import atomic_open, atomic_write_bytes, atomic_write_text
from dlzero.data.hcpe import HCPE_DTYPE, find_bad_hcp, legal_move16s, read_hcpe, write_hcpe
from dlzero.data.hcpe3 import (
    BLACK_WIN,
    FLAG_MAX_MOVES,
    FLAG_NYUGYOKU,
    FLAG_REPETITION,
    RESULT_DRAW,
    WHITE_WIN,
    Hcpe3Record,
    MoveRecord,
    ShardWriter,
    TrainingPosition,
    encode_game,
    iter_training_positions,
    list_shards,
    read_hcpe3,
    read_sidecar,
    write_hcpe3,
)
from dlzero.data.record_import import ImportReport, find_record_files, import_records

__all__ = [
    "BLACK_WIN",
    "FLAG_MAX_MOVES",
    "FLAG_NYUGYOKU",
    "FLAG_REPETITION",
    "HCPE_DTYPE",
    "RESULT_DRAW",
    "WHITE_WIN",
    "Hcpe3Record",
    "ImportReport",
    "MoveRecord",
    "ShardWriter",
    "TrainingPosition",
    "atomic_open",
    "atomic_write_bytes",
    "atomic_write_text",
    "encode_game",
    "find_bad_hcp",
    "find_record_files",
    "import_records",
    "iter_training_positions",
    "legal_move16s",
    "list_shards",
    "read_hcpe",
    "read_hcpe3",
    "read_sidecar",
    "write_hcpe",
    "write_hcpe3",
]

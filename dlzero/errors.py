"""Errors that dlzero reports to people.

Every failure caused by bad input (a file, a position, a command, a config value) is raised as a
`DlzeroError` subclass whose message names the thing and what is wrong with it. The CLI prints
such errors as one line and exits with status 2, instead of showing a traceback from deep inside
torch or cshogi.
"""

from __future__ import annotations


class DlzeroError(Exception):
    """Base class for errors caused by input a user can fix."""


class ConfigError(DlzeroError):
    """A config file, key or value is invalid."""


class PositionError(DlzeroError):
    """A position (SFEN, `startpos moves ...`) or a move in it is malformed or illegal."""


class ModelFileError(DlzeroError):
    """A checkpoint or ONNX file is missing, truncated, or does not match what is expected."""


class NetworkError(DlzeroError):
    """A shipped network's manifest is malformed, or a file differs from what the manifest records."""


class BackendError(DlzeroError):
    """An inference backend or provider was requested that is not available here."""


class ServerError(DlzeroError):
    """An inference server cannot be reached, stopped answering, or refused a request."""


class DataError(DlzeroError):
    """A data file (hcp/hcpe/hcpe3 shard, game record) is corrupt, truncated or unreadable.

    `path` and `offset` (bytes from the start of the file, or None) say where.
    """

    def __init__(self, path: str, offset: int | None, reason: str) -> None:
        where = f"{path}" if offset is None else f"{path} at byte {offset}"
        super().__init__(f"{where}: {reason}")
        self.path = str(path)
        self.offset = offset
        self.reason = reason


class RunDirError(DlzeroError):
    """A run directory is missing pieces, or was written by an incompatible version."""

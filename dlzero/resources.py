"""Where the files that ship with dlzero are: configs, opening suites, the validation set, the networks.

In a checkout they sit in the top-level `configs/` folder; an installed wheel carries the same folder inside
the package as `dlzero/configs` (setup.py maps it), so no reader may find them through `Path(__file__).parents`.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path


def configs_dir() -> Path:
    """The folder of the shipped configs: the package's own copy when installed, else the checkout's."""
    installed = Path(str(resources.files("dlzero"))) / "configs"
    if installed.is_dir():
        return installed
    return Path(__file__).resolve().parents[1] / "configs"


def config_path(*parts: str) -> Path:
    """A shipped file below configs/, e.g. config_path("openings", "gate.txt")."""
    return configs_dir().joinpath(*parts)

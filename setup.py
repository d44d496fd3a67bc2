"""The package list, which pyproject.toml cannot spell: selfplay/, train/ and configs/ stay top-level folders of
the checkout but install inside the `dlzero` package (as dlzero.selfplay, dlzero.train, dlzero.configs), so an
installed dlzero neither claims the common names `selfplay`/`train` nor loses its configs, opening suites and
shipped networks (configs/networks/: manifests and .onnx/.pt files, docs/networks.md)."""

from setuptools import find_packages, setup

MAPPED = {"dlzero.selfplay": "selfplay", "dlzero.train": "train", "dlzero.configs": "configs"}

setup(
    packages=[*find_packages(include=["dlzero", "dlzero.*"]), *MAPPED,
              "dlzero.configs.openings", "dlzero.configs.validation", "dlzero.configs.networks"],
    package_dir=MAPPED,
    package_data={"dlzero": ["py.typed", "dashboard/static/*"],
                  "dlzero.configs": ["*.yaml"], "dlzero.configs.openings": ["*"],
                  "dlzero.configs.validation": ["*"], "dlzero.configs.networks": ["*"]},
)

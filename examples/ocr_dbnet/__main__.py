"""``python -m examples.ocr_dbnet [overrides...]``: the OCR demo (Hydra app, configs in ``configs/``)."""

import hydra
from omegaconf import DictConfig

from .app import run


@hydra.main(version_base="1.3", config_path="configs", config_name="demo")
def main(cfg: DictConfig) -> None:
    run(cfg)


if __name__ == "__main__":
    main()

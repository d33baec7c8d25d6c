"""Regenerate the real torch traces in this folder (torch 2.13, CPU): ``python make_real_traces.py``.

``torch_cpu_marked.pt.trace.json.gz``: perfkit's part marks (``perfkit.part.*``), a ``collate`` section
announced through ``add_metadata_json("perfkit", ...)``, memory events, three ``ProfilerStep#N`` ranges.
``torch_cpu_plain.pt.trace.json.gz``: the same loop with no marks of ours, so only torch's own names
(``enumerate(DataLoader)#...``, ``autograd::engine::...``, ``Optimizer.step#...``) tell the parts.
``lightning_cpu.pt.trace.json.gz``: a 3-batch ``Trainer.fit`` under Lightning's own
``PyTorchProfiler`` (lightning 2.6), so its ``[pl][profile]...`` names tell the parts.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile, record_function, schedule
from torch.utils.data import DataLoader, TensorDataset

HERE = Path(__file__).parent


def run(out: Path, *, marked: bool) -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    data = TensorDataset(torch.randn(64, 8), torch.randn(64, 1))

    def mark(name: str) -> contextlib.AbstractContextManager[object]:
        return record_function(name) if marked else contextlib.nullcontext()

    def collate(batch: list[tuple[torch.Tensor, ...]]) -> list[torch.Tensor]:
        with mark("collate"):
            return [torch.stack(column) for column in zip(*batch, strict=True)]

    def batches() -> Iterator[list[torch.Tensor]]:
        it = iter(DataLoader(data, batch_size=4, collate_fn=collate))
        while True:
            with mark("perfkit.part.data_wait"):
                batch = next(it)
            yield batch

    window = schedule(wait=0, warmup=1, active=3, repeat=1)
    with profile(activities=[ProfilerActivity.CPU], schedule=window, profile_memory=True) as prof:
        if marked:
            prof.add_metadata_json("perfkit", json.dumps({"sections": ["collate"]}))
        for _, (x, y) in zip(range(4), batches(), strict=False):
            with mark("perfkit.part.forward"):
                loss = torch.nn.functional.mse_loss(model(x), y)
            with mark("perfkit.part.backward"):
                loss.backward()
            with mark("perfkit.part.optimizer"):
                opt.step()
                opt.zero_grad()
            prof.step()
    prof.export_chrome_trace(str(out))


def run_lightning(out: Path) -> None:
    import lightning as L
    from lightning.pytorch.profilers import PyTorchProfiler

    class Model(L.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.net = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))

        def training_step(self, batch: list[torch.Tensor], index: int) -> torch.Tensor:
            x, y = batch
            return torch.nn.functional.mse_loss(self.net(x), y)

        def configure_optimizers(self) -> torch.optim.Optimizer:
            return torch.optim.SGD(self.parameters(), lr=0.1)

    torch.manual_seed(0)
    loader = DataLoader(TensorDataset(torch.randn(64, 8), torch.randn(64, 1)), batch_size=4)
    with tempfile.TemporaryDirectory() as tmp:
        trainer = L.Trainer(
            max_epochs=1,
            limit_train_batches=3,
            profiler=PyTorchProfiler(dirpath=tmp, filename="fit"),
            logger=False,
            enable_checkpointing=False,
            enable_progress_bar=False,
            enable_model_summary=False,
            accelerator="cpu",
        )
        trainer.fit(Model(), loader)
        (trace,) = Path(tmp).glob("*.pt.trace.json")
        with trace.open("rb") as src, gzip.open(out, "wb") as dst:
            shutil.copyfileobj(src, dst)


if __name__ == "__main__":
    run(HERE / "torch_cpu_marked.pt.trace.json.gz", marked=True)
    run(HERE / "torch_cpu_plain.pt.trace.json.gz", marked=False)
    run_lightning(HERE / "lightning_cpu.pt.trace.json.gz")

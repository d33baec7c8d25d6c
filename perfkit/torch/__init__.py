"""perfkit for PyTorch: ``import perfkit.torch`` (needs torch; the core does not).

    loader = perfkit.torch.instrument(DataLoader(ds, num_workers=4, collate_fn=collate), "train")
    windows = perfkit.torch.ProfilerWindows(epochs=[1], stages=["val"], profile_steps=20)
    for epoch in range(3):
        with perfkit.window("train", epoch=epoch, listeners=[windows]) as w:
            for batch in w.iterate(loader):
                ...

``instrument`` brings the records made inside the loader's worker processes (``@timed``
collate functions, ``section`` blocks in ``__getitem__``) into this process with each
batch: torch DataLoaders and their subclasses (instrumented in place, class untouched),
accelerate's loaders, WebDataset's WebLoader, torchdata.nodes pipelines, any iterable.
``ProfilerWindows`` opens torch.profiler windows on chosen stage epochs and steps,
and analyses their traces off the loop's thread. ``gather_ranks`` merges the ranks of a
distributed job once per stage epoch, bounded in time and bytes (``TorchRanks(timeout_s=...)``
for another timeout than its 300 s). ``autorun`` times every DataLoader
iteration of the process with no code changed (what ``perfkit run`` starts).
"""

from ._autorun import autorun
from ._ddp import TorchRanks, world_size
from ._instrument import instrument
from ._profiling import ProfilerWindows

gather_ranks = TorchRanks()
"""The merge of a distributed job's ranks (a ``perfkit.stages.Ranks`` transport; see ``TorchRanks``)."""

__all__ = ["ProfilerWindows", "TorchRanks", "autorun", "gather_ranks", "instrument", "world_size"]

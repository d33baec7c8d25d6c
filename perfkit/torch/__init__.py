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
and analyses their traces off the loop's thread. ``gather_ranks`` is the one collective per
stage epoch that merges the ranks of a distributed job. ``autorun`` times every DataLoader
iteration of the process with no code changed (what ``perfkit run`` starts). ``trial`` times a
DataLoader alone at each worker count and picks the smallest setting that keeps up.
"""

from ._autorun import autorun
from ._ddp import gather as gather_ranks
from ._ddp import world_size
from ._instrument import instrument
from ._profiling import ProfilerWindows
from ._trial import trial

__all__ = ["ProfilerWindows", "autorun", "gather_ranks", "instrument", "trial", "world_size"]

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
for another timeout than its 300 s). ``follow_loaders`` drives a session's stage epochs from
every DataLoader iteration of the process with no code changed (what ``perfkit run`` starts).
``time_step_parts`` tells a session each backward, optimizer step and zero_grad of the process
(a monitored run's session starts it). ``time_gradient_sync`` times each rank's wait for DDP's
gradient all-reduce, so a rank whose compute is slow is told from the ranks that wait for it
(call it once on the DDP model). ``time_collectives`` times every other collective's exposed wait
(FSDP2's all-gathers and reduce-scatters, a script's all-reduce), in the step part it fell in, with
its bytes (a monitored run's session starts it where ``torch.distributed`` is imported).
``trial`` times a DataLoader alone at each worker count and picks the smallest setting that
keeps up. ``count_flops`` counts a real step's FLOPs once (``FlopCounterMode``), split by the
dtype each matmul ran in: MFU's numerator (``perfkit.resources.mfu``). ``watch_syncs`` times
where the host blocks on the device (``loss.item()``, ``.cpu()``), per call site; ``time_copy``
/ ``to_device`` time a batch's copy to the device, its bytes and whether they were pinned;
``load_loader`` imports the loader a user's factory makes (``perfkit trial MODULE:FACTORY``).
"""

from ._collectives import time_collectives
from ._copies import batch_bytes, pinned_bandwidth, time_copy, to_device
from ._ddp import TorchRanks, world_size
from ._flops import FlopCount, count_flops
from ._follow import follow_loaders
from ._gradsync import time_gradient_sync
from ._instrument import instrument
from ._parts import time_step_parts
from ._profiling import ProfilerWindows
from ._syncs import SyncWatch, watch_syncs
from ._trial import trial
from ._trial_loaders import load_loader

gather_ranks = TorchRanks()
"""The merge of a distributed job's ranks (a ``perfkit.stages.Ranks`` transport; see ``TorchRanks``)."""

__all__ = [
    "FlopCount",
    "ProfilerWindows",
    "SyncWatch",
    "TorchRanks",
    "batch_bytes",
    "count_flops",
    "follow_loaders",
    "gather_ranks",
    "instrument",
    "load_loader",
    "pinned_bandwidth",
    "time_collectives",
    "time_copy",
    "time_gradient_sync",
    "time_step_parts",
    "to_device",
    "trial",
    "watch_syncs",
    "world_size",
]

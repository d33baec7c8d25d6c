"""perfkit for PyTorch data loading: ``import perfkit.torch`` (needs torch; the core does not).

    loader = perfkit.torch.instrument(DataLoader(ds, num_workers=4, collate_fn=collate), "train")
    for batch in perfkit.timed_iter(loader, "train"):
        ...

Records made inside the loader's worker processes (``@timed`` collate functions,
``section`` blocks in ``__getitem__``) arrive in this process with each batch.
"""

from ._loops import FETCH_SUFFIX
from ._workers import Shipment, WorkerInit, instrument

__all__ = ["FETCH_SUFFIX", "Shipment", "WorkerInit", "instrument"]

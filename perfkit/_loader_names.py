"""How the loaders of one stage are named: the first after its stage, the ``k``-th from the second
on ``STAGE/k`` (Lightning's ``dataloader_idx``, a script's second loop in one window), so each
has its own series (``val/1.data.wait``) and its own account inside the stage's, and a stage
with one loader reads as it always did. ``perfkit.names`` re-exports these, where they are public.
"""

from __future__ import annotations

LOADER_INDEX = "/"
"""Between a stage and the index of one of its several loaders: ``val/1`` is validation's second."""


def loader_name(stage: str, index: int) -> str:
    """The name of the ``index``-th loader a stage iterates (Lightning's ``dataloader_idx``, a
    script's second loop in one window): the first keeps the stage's name, so a stage with one
    loader reads as it always did.

    >>> loader_name("val", 0), loader_name("val", 1)
    ('val', 'val/1')
    """
    return stage if index == 0 else f"{stage}{LOADER_INDEX}{index}"


def loader_index(name: str, loader: str) -> int | None:
    """The index of loader ``name`` among ``loader``'s (``loader_name``'s inverse); None when
    ``name`` is not one of them.

    >>> loader_index("val/2", "val"), loader_index("val", "val"), loader_index("value", "val")
    (2, 0, None)
    """
    if name == loader:
        return 0
    rest = name[len(loader) + len(LOADER_INDEX) :] if name.startswith(loader + LOADER_INDEX) else ""
    return int(rest) if rest.isdigit() and not rest.startswith("0") else None


def loader_label(name: str, loader: str, dataset: str | None = None) -> str:
    """How a verdict names one of a stage's several loaders: ``val loader 1 (SlowDataset)``.

    >>> loader_label("val/1", "val", "SlowDataset"), loader_label("val", "val")
    ('val loader 1 (SlowDataset)', 'val loader 0')
    """
    label = f"{loader} loader {loader_index(name, loader)}"
    return f"{label} ({dataset})" if dataset else label

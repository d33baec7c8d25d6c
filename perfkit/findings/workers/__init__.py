"""The worker and loader advice, in one home: what the run says of its loaders, what a change gains,
what each loader verdict proposes, in words, and whether a later run made the change.

* ``_facts``: what is read (the workers' side of a loader, the loop's pace, the epoch's start,
  ``LoaderFacts``), from what ``perfkit.loaders`` recorded;
* ``_model``: what a change gains and the bounds that cap it (cores, memory, noise), ``Proposal``;
* ``_words``: the phrases every proposal shares (a bound, a reason for no change, the gain);
* ``_proposals``: INPUT_BOUND's, EPOCH_BOUNDARY's and CONTENTION's proposals (the rules' ``propose``
  step), from a loader trial where one ran, else from the model;
* ``_followed``: whether run B made run A's proposed change, and what it saved (``perfkit compare``).

The rules (``..rules``) find; this package advises. A loader trial itself needs torch
(``perfkit.torch.trial``), and its table is a renderer's (``perfkit.reports.trial_text``).
"""

from ._facts import LoaderFacts, boundary, facts, loader_boundary, loaders, loop_s_per_batch, workers
from ._followed import advice_followed
from ._model import Proposal, Relief, relief
from ._proposals import core_advice, loader_advice, propose_measured, propose_workers, restart_advice

__all__ = [
    "LoaderFacts",
    "Proposal",
    "Relief",
    "advice_followed",
    "boundary",
    "core_advice",
    "facts",
    "loader_advice",
    "loader_boundary",
    "loaders",
    "loop_s_per_batch",
    "propose_measured",
    "propose_workers",
    "relief",
    "restart_advice",
    "workers",
]

"""The rules that judge a stage epoch, one small declaration each; ``RULES`` is the list a diagnosis walks.

Each module holds the rules that read one thing, in a ``RULES`` tuple of its own: ``_data`` (the
data wait, the loaders), ``_contention`` (cores wanted by workers and threads), ``_compute``
(the step, its sections), ``_parts`` (one level below: the step's parts, where a wait went, each
worker's batches), ``_device`` (the GPU's own account: syncs, copies, launches, idle time),
``_hooks`` (what runs outside the step, and what no timer covers),
``_epochs`` (an epoch against training's and its stage's earlier ones), ``_comm`` (the ranks'
collectives: FSDP's all-gathers and reduce-scatters, DDP's all-reduce), ``_ranks`` (the slow rank).
A rule (``Rule``) is its kind, the signals it reads, its threshold with the reason for it
(docs/diagnosis.md lists them), a judge, and how its verdicts share the epoch's seconds and
advise; a diagnosis judges with every rule, partitions the epoch's seconds between the verdicts,
then lets each rule propose (see ``_rule``).

Adding a rule is adding a declaration to the ``RULES`` of the module that reads what it reads
(a new module's tuple joins the list below), and three tests to tests/findings (it fires, it is
silent below its threshold, it abstains or says nothing). A rule that names the largest subject
of an account part needs no judge of its own:

    Rule("SLOW_SAMPLER", ("sampler",), 0.05, "a sampler should cost nothing beside the step",
         TopSubject("sampler", "sampler {name} takes {share:.0%} of the {stage} epoch ({seconds})",
                    "make {name} cheaper", "sampler_s"),
         claims="other")

Any other is a judge of the epoch and the rule's own threshold (never a constant of its own):

    def slow_backward(case: Case, minimum: float) -> Outcome:
        share = ...                         # from case.window.account, its snapshot
        if share < minimum:
            return None
        return case.verdict(share, "the backward pass takes ...", "what to do", evidence={...})

    Rule("SLOW_BACKWARD", ("backward",), 0.30, "why this threshold", slow_backward, claims="step")

``claims`` is the account part whose seconds its verdicts explain; ``generality`` (0: it names one
thing, served first), ``symptom`` and ``slows`` tell the partition how it shares them with the
others; ``propose`` is its advice, run after the partition (``workers`` holds the loaders').
"""

from ..._rule import kinds
from . import _comm, _compute, _contention, _data, _device, _epochs, _hooks, _parts, _ranks
from ._rule import Rule
from ._top import TopSubject

RULES: tuple[Rule, ...] = (
    *_data.RULES,
    *_contention.RULES,
    *_compute.RULES,
    *_parts.RULES,
    *_device.RULES,
    *_comm.RULES,
    *_hooks.RULES,
    *_epochs.RULES,
    *_ranks.RULES,
)

KINDS = kinds(RULES)
"""Every kind of run verdict, as ``Verdict.kind`` spells it: declared once, by its rule."""

__all__ = ["KINDS", "RULES", "Rule", "TopSubject"]

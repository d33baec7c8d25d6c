"""perfkit for the Hugging Face Trainer: ``Trainer(..., callbacks=[PerfkitCallback()])``.

Each stage epoch (a training epoch, each ``evaluate()``, each ``predict()``) is accounted for
(data wait including worker start-up, steps as micro-batches, the optimizer's steps, other),
judged (its first verdict in the console block), written to a run directory under the
Trainer's ``output_dir`` and logged through ``Trainer.log``. ``perfkit summary OUTPUT_DIR``
reads it back.
"""

from ._callback import PerfkitCallback

__all__ = ["PerfkitCallback"]

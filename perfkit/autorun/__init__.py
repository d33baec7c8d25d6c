"""``perfkit run``: a training command timed with no code changed, and diagnosed when it ends.

``launch`` runs the command as a child process whose Python processes start perfkit once they
import torch (``_launch``: a ``sitecustomize`` hook, signals passed on, the exit code kept);
``autorun`` is what each such process runs then: one ``perfkit.monitor.Session`` writing into the
run directory, its stage epochs driven by every DataLoader iteration
(``perfkit.torch.follow_loaders``). The command line (``perfkit run``) diagnoses the run
directory once the command has ended. docs/run.md says what is timed and what is not.
"""

from ._autorun import autorun
from ._launch import LaunchError, launch

__all__ = ["LaunchError", "autorun", "launch"]

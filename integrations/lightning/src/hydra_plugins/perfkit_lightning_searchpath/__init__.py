"""Hydra finds perfkit-lightning's configs by itself: ``callbacks=perf_monitor`` just works.

Hydra discovers plugins in the ``hydra_plugins`` namespace package; this one
appends ``pkg://perfkit_lightning.conf`` to every app's config search path.
"""

from hydra.core.config_search_path import ConfigSearchPath
from hydra.plugins.search_path_plugin import SearchPathPlugin


class PerfkitLightningSearchPathPlugin(SearchPathPlugin):
    def manipulate_search_path(self, search_path: ConfigSearchPath) -> None:
        search_path.append(provider="perfkit-lightning", path="pkg://perfkit_lightning.conf")

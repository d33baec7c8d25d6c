"""check_stages: the one check of a ``stages=`` argument (PerfMonitor, ProfilerCallback, ProfilerWindows)."""

from __future__ import annotations

import pytest

from perfkit.names import STAGES
from perfkit.stages import check_stages


def test_some_of_the_stages_in_any_collection_come_back_as_a_tuple_in_their_order() -> None:
    assert check_stages(["val", "train"]) == ("val", "train")
    assert check_stages(s for s in ("test",)) == ("test",)
    assert check_stages(()) == ()
    assert check_stages(STAGES) == STAGES


@pytest.mark.parametrize("value", ["val", 5, None])
def test_a_string_or_a_non_collection_is_a_type_error_naming_parameter_and_value(value: object) -> None:
    with pytest.raises(TypeError, match=f"^profile_stages must be a list of stage names, got {value!r}$"):
        check_stages(value, "profile_stages")


def test_a_name_outside_among_is_a_value_error_naming_parameter_name_and_choices() -> None:
    message = r"^stages: unknown stage 'predict', expected some of \['train', 'val'\]$"
    with pytest.raises(ValueError, match=message):
        check_stages(["train", "predict"], among=("train", "val"))
    with pytest.raises(ValueError, match="unknown stage 'eval'"):
        check_stages(["eval"])


def test_among_none_takes_any_non_empty_name_as_a_plain_script_may_choose_its_own() -> None:
    assert check_stages(["finetune"], among=None) == ("finetune",)
    for bad in ("", 3):
        with pytest.raises(ValueError, match=f"^stages: stage names are non-empty strings, got {bad!r}$"):
            check_stages(["train", bad], among=None)

"""build_run_config: one builder for every access; the caller's internal mode key never wins."""

import pytest

from deerflow.errors import RECONFIGURATION_MESSAGE, CheckpointModeReconfigurationError
from deerflow.runtime.checkpoint_mode import (
    CHECKPOINT_MODE_METADATA_KEY,
    INTERNAL_CHECKPOINT_MODE_KEY,
    freeze_checkpoint_channel_mode,
)
from deerflow.runtime.run_config import build_run_config


def test_it_addresses_a_checkpoint_with_the_frozen_mode():
    freeze_checkpoint_channel_mode("delta")
    config = build_run_config("t-1", checkpoint_id="c-9", checkpoint_ns="research:x")
    assert config["configurable"] == {
        "thread_id": "t-1", "checkpoint_ns": "research:x", "checkpoint_id": "c-9",
        INTERNAL_CHECKPOINT_MODE_KEY: "delta",
    }
    assert config["metadata"] == {CHECKPOINT_MODE_METADATA_KEY: "delta"}


def test_it_discards_a_caller_supplied_internal_key():
    freeze_checkpoint_channel_mode("full")
    caller = {INTERNAL_CHECKPOINT_MODE_KEY: "delta", "user_id": "u"}
    config = build_run_config("t", configurable=caller)
    assert config["configurable"][INTERNAL_CHECKPOINT_MODE_KEY] == "full"
    assert config["configurable"]["user_id"] == "u"
    assert caller == {INTERNAL_CHECKPOINT_MODE_KEY: "delta", "user_id": "u"}  # untouched
    assert CHECKPOINT_MODE_METADATA_KEY not in config["metadata"]


def test_it_rejects_an_explicit_mode_other_than_the_frozen_one():
    freeze_checkpoint_channel_mode("full")
    with pytest.raises(CheckpointModeReconfigurationError) as info:
        build_run_config("t", mode="delta")
    assert str(info.value) == RECONFIGURATION_MESSAGE


def test_it_needs_a_mode_before_the_first_freeze():
    with pytest.raises(ValueError, match="freeze_checkpoint_channel_mode"):
        build_run_config("t")


def test_head_config_has_no_checkpoint_id_and_metadata_is_copied():
    freeze_checkpoint_channel_mode("delta")
    meta = {"run_id": "r"}
    config = build_run_config("t", metadata=meta)
    assert "checkpoint_id" not in config["configurable"]
    assert meta == {"run_id": "r"}
    assert config["metadata"]["run_id"] == "r"

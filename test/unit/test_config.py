"""Every parameter is declared once with a description and a range, and bad values are refused."""
from pathlib import Path

import pytest

from brainmem_ros.core.config import ConfigError, MemoryConfig, iter_params

CONFIG = Path(__file__).resolve().parents[2] / "config"


def test_every_parameter_is_described_and_its_default_is_valid():
    params = list(iter_params())
    assert len(params) > 40
    for param in params:
        assert param.description and len(param.description) > 10, param.name
        lo, hi = param.range
        if param.type in (int, float):
            assert lo is not None and hi is not None and lo <= param.default <= hi, param.name
    MemoryConfig.from_flat({p.name: p.default for p in params})


def test_shipped_config_loads_and_matches_the_declared_defaults():
    assert MemoryConfig.from_yaml(CONFIG / "memory.yaml") == MemoryConfig()


def test_broken_config_is_rejected_naming_every_problem():
    with pytest.raises(ConfigError) as info:
        MemoryConfig.from_yaml(CONFIG / "broken.yaml")
    message = str(info.value)
    assert "retrieval.top_k=-3 is outside [1, 1000]" in message
    assert "retrieval.language='klingon'" in message
    assert "forgetting.decay_tau_s must be float" in message


@pytest.mark.parametrize("flat, fragment", [
    ({
        "retrieval.top_k": 0
    }, "outside"),
    ({
        "retrieval.top_k": True
    }, "must be int"),
    ({
        "store.synchronous": "OFF"
    }, "not one of"),
    ({
        "importance.base": float("nan")
    }, "finite"),
    ({
        "retrieval.no_such": 1
    }, "unknown parameter"),
    ({
        "retrieval.top_k": 60
    }, "must not exceed"),
    ({
        "encoding.entities": [1, 2]
    }, "list of strings"),
])
def test_bad_values_are_refused(flat, fragment):
    with pytest.raises(ConfigError, match=fragment):
        MemoryConfig().replace(**flat)


def test_unreadable_and_invalid_yaml_give_clear_errors(tmp_path):
    with pytest.raises(ConfigError, match="cannot read config"):
        MemoryConfig.from_yaml(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("retrieval: [unclosed")
    with pytest.raises(ConfigError, match="not valid YAML"):
        MemoryConfig.from_yaml(bad)


def test_plain_mapping_and_ros_parameter_file_are_equivalent(tmp_path):
    plain = tmp_path / "plain.yaml"
    plain.write_text("retrieval:\n  top_k: 7\n")
    ros = tmp_path / "ros.yaml"
    ros.write_text(
        "/**:\n  ros__parameters:\n    retrieval:\n      top_k: 7\n    topics:\n      depth: 10\n")
    assert MemoryConfig.from_yaml(plain) == MemoryConfig.from_yaml(ros)
    assert MemoryConfig.from_yaml(plain).retrieval.top_k == 7


def test_shipped_config_is_the_generated_one():
    """config/memory.yaml lists every parameter: regenerate it with `brainmem-ros params --yaml`."""
    from brainmem_ros.core.config import defaults_yaml

    assert (CONFIG / "memory.yaml").read_text() == defaults_yaml()

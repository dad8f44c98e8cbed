import subprocess
import sys

import pytest
import yaml

from simplepose.config.config_file import (
    RETIRED_KEYS,
    ConfigError,
    config_from_dict,
    load_config,
    save_config,
    to_dict,
    with_overrides,
)
from simplepose.config.schema import OUTPUT_STRIDE
from tests.paths import REPO_ROOT


@pytest.mark.parametrize("preset", sorted((REPO_ROOT / "config").glob("*.yaml")))
def test_every_preset_loads(preset):
    load_config(preset)


def test_paper_preset_holds_the_original_values():
    cfg = load_config(REPO_ROOT / "config" / "simplepose_coco.yaml")
    assert (cfg.data.input_size, OUTPUT_STRIDE) == (512, 4)
    assert (cfg.model.stacks, cfg.model.inp_dim, cfg.model.increase) == (4, 256, 128)
    assert cfg.loss.scale_weights == [0.1, 0.2, 0.4, 1.6, 6.4]
    assert (cfg.targets.sigma, cfg.targets.limb_sigma, cfg.targets.limb_margin) == (9, 7, 4)
    assert (cfg.train.batch_size, cfg.train.lr, cfg.train.optimizer) == (4, 2.5e-5, "sgd")
    assert cfg.train.weight_decay is None  # SGD's default, the original's 5e-4 (tests/test_engine_resume_recipe.py)
    assert cfg.eval.scales == [0.5, 1.0, 1.5, 2.0, 3.0]


def test_overrides_are_typed():
    cfg = load_config(None, ["train.lr=1e-3", "train.epochs=7", "eval.scales=[1,2]", "eval.flip=false",
                             "train.clip_grad_norm=5", "train.lr_restart_epoch=null"])  # fmt: skip
    assert cfg.train.lr == 1e-3 and isinstance(cfg.train.lr, float)
    assert cfg.train.epochs == 7 and cfg.eval.scales == [1.0, 2.0] and cfg.eval.flip is False
    assert cfg.train.clip_grad_norm == 5.0 and cfg.train.lr_restart_epoch is None


@pytest.mark.parametrize(
    "override, key, suggested",
    [
        ("train.lrr=1", "train.lrr", "train.lr"),
        ("trian.lr=1", "trian.lr", "train.lr"),
        ("train.epochs=ten", "train.epochs", None),
        ("eval.flip=maybe", "eval.flip", None),
        ("targets.limb_mode=sideways", "targets.limb_mode", None),
        ("train.lr", "train.lr", None),  # not key=value
        ("data.input_size=500", "data.input_size", None),
        ("model.stacks=3", "loss.stack_weights", None),  # one weight per stack
        ("data.loader_timeout=-1", "data.loader_timeout", None),
        ("eval.min_mean_score=-0.1", "eval.min_mean_score", None),
    ],
)
def test_bad_overrides_name_the_key(override, key, suggested):
    with pytest.raises(ConfigError) as e:
        load_config(None, [override])
    assert e.value.key == key and e.value.file is None
    assert suggested is None or suggested in e.value.suggestions


@pytest.mark.parametrize(
    "given, first",
    [
        ("train.lerning_rate", "train.lr"),  # the initials of its words, in its section
        ("train.learning_rate", "train.lr"),
        ("train.warmup", "train.warmup_epochs"),  # a longer name of its section that it begins
        ("train.epocs", "train.epochs"),
        ("eval.scale", "eval.scales"),
    ],
)
def test_an_unknown_key_suggests_its_sections_closest_name_first(given, first):
    with pytest.raises(ConfigError) as e:
        load_config(None, [f"{given}=1"])
    assert e.value.suggestions[0] == first and f"closest valid names: {first}" in str(e.value)


def test_unknown_key_in_yaml_names_file(tmp_path):
    p = tmp_path / "bad.yaml"
    p.write_text("train:\n  epohcs: 3\n")
    with pytest.raises(ConfigError) as e:
        load_config(p)
    assert (e.value.key, e.value.file, e.value.suggestions[:1]) == ("train.epohcs", str(p), ("train.epochs",))


def test_saved_config_round_trips(tmp_path):
    cfg = load_config(REPO_ROOT / "config" / "quickstart.yaml", ["train.seed=3"])
    save_config(cfg, tmp_path / "config.yaml")
    again = config_from_dict(yaml.safe_load((tmp_path / "config.yaml").read_text()))
    assert to_dict(again) == to_dict(cfg)


def test_cli_error_is_clean(tmp_path):
    """A bad override through a real command: one line on stderr, non-zero exit, no traceback."""
    code = (
        "from simplepose.config.config_file import load_config; from simplepose.utils.errors import cli_main; "
        "import sys; sys.exit(cli_main(lambda: load_config(None, ['train.lrr=1']))())"
    )
    r = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True)
    assert r.returncode == 2
    assert "Traceback" not in r.stderr and "train.lrr" in r.stderr


def test_retired_keys_are_refused_with_the_reason_but_dropped_from_saved_configs():
    for key in ("data.stride", "train.fault_nan_steps"):
        with pytest.raises(ConfigError) as e:
            load_config(None, [f"{key}=1"])
        assert e.value.key == key and RETIRED_KEYS[key] in str(e.value)  # the reason it was retired
    saved = to_dict(load_config(None, ["train.lr=0.5"]))
    saved["data"]["stride"] = 4  # a checkpoint of an earlier version
    saved["train"]["fault_exit_step"] = -1
    assert config_from_dict(saved).train.lr == 0.5


def test_with_overrides_returns_a_validated_copy_and_leaves_the_original_alone():
    cfg = load_config(None, [])
    changed = with_overrides(cfg, {"eval.scales": [1.0], "train.lr": 1e-3}, "test")
    assert changed.eval.scales == [1.0] and changed.train.lr == 1e-3
    assert cfg.eval.scales == [0.5, 1.0, 1.5, 2.0, 3.0] and cfg.train.lr == 2.5e-5
    with pytest.raises(ConfigError) as e:
        with_overrides(cfg, {"model.stacks": 2}, "test")
    assert e.value.key == "loss.stack_weights"


@pytest.mark.parametrize(
    "words, instead",
    [
        (["--device", "cpu"], "train.device=cpu"),
        (["--epochs=3"], "train.epochs=3"),
        (["--batch-size", "8"], "train.batch_size=8 or eval.batch_size=8"),
        (["--train.lr", "1e-3"], "train.lr=1e-3"),
        (["--lr"], "train.lr=VALUE"),
    ],
)
def test_an_option_named_as_a_setting_names_the_override_to_give(words, instead, capsys):
    from simplepose import train

    assert train.main([*words, "train.out_dir=/nonexistent/never"]) == 2
    err = capsys.readouterr().err
    assert err == f"error: {words[0]} is not an option of this command; settings are given as key=value: {instead}\n"


def test_an_unknown_option_that_is_no_setting_is_left_to_argparse(capsys):
    from simplepose import train

    with pytest.raises(SystemExit) as e:
        train.main(["--no-such-thing", "train.out_dir=/nonexistent/never"])
    assert e.value.code == 2 and "unrecognized arguments: --no-such-thing" in capsys.readouterr().err


def test_a_checkpoint_given_as_config_names_where_it_goes():
    ckpt = next((REPO_ROOT / "tests" / "data" / "checkpoints").glob("*.pt"))
    with pytest.raises(ConfigError) as e:
        load_config(ckpt)
    assert e.value.file == str(ckpt) and "not a YAML config" in str(e.value)
    assert f"train.resume={ckpt}" in str(e.value) and f"train.init_weights={ckpt}" in str(e.value)


@pytest.mark.parametrize(
    "word, meant",
    [("config/tiny.yaml", "--config config/tiny.yaml"), ("runs/x/last.pt", "train.resume=runs/x/last.pt"),
     ("train.device", "train.device=VALUE as one word")],
)  # fmt: skip
def test_a_word_without_equals_says_what_it_was_probably_meant_as(word, meant):
    with pytest.raises(ConfigError) as e:
        load_config(None, [word])
    assert "is not of the form key=value" in str(e.value) and meant in str(e.value)

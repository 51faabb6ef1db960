"""Settings declared once: flags, defaults, help, aliases, manifests and command
lines all come from the config dataclass's declarations."""

from __future__ import annotations

import argparse
import shlex
import warnings
from dataclasses import dataclass
from pathlib import Path

import pytest

from concept_grounding import settings
from concept_grounding.settings import setting
from concept_grounding.validators import int_at_least, positive_int
from concept_grounding.world.config import WorldConfig
from concept_grounding.world.export import WorldExportConfig


@dataclass(frozen=True)
class _Config:
    out: str = setting(help="output folder")
    size: int = setting(64, "image side (px)", parse=int_at_least(32), aliases=("--image-size",))
    steps: int = setting(20, "denoising steps", parse=positive_int, manifest_key="num_inference_steps")
    names: tuple[str, ...] | None = setting(None, "names", nargs="*", convert=tuple)
    guides: bool = setting(False, "also save guides", action="store_true", manifest_key="")
    internal: int = 3


def _parser(config: type = _Config, **kwargs) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="x", formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    settings.add_arguments(parser, config, **kwargs)
    return parser


def test_flags_defaults_and_required_come_from_the_declaration():
    args = _parser().parse_args(["--out", "o"])
    assert settings.from_args(_Config, args) == _Config(out="o")
    with pytest.raises(SystemExit):
        _parser().parse_args([])  # --out is required: it has no default
    assert settings.flags(_Config) == {
        "out": "--out",
        "size": "--size",
        "steps": "--steps",
        "names": "--names",
        "guides": "--guides",
    }


def test_a_deprecated_spelling_parses_to_the_same_setting_and_is_hidden():
    parser = _parser()
    with pytest.warns(FutureWarning, match="--image-size is a deprecated spelling of --size; use --size"):
        assert parser.parse_args(["--out", "o", "--image-size", "48"]).size == 48
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the flag itself does not warn
        assert parser.parse_args(["--out", "o", "--size", "48"]).size == 48
    assert "--image-size" not in parser.format_help() and "--size SIZE" in parser.format_help()
    with pytest.raises(SystemExit):
        parser.parse_args(["--out", "o", "--image-size", "16"])  # the alias keeps the validator


def test_validator_default_help_and_conversion():
    parser = _parser(defaults={"steps": 7})
    args = parser.parse_args(["--out", "o", "--names", "a", "b", "--guides"])
    config = settings.from_args(_Config, args)
    assert (config.steps, config.names, config.guides) == (7, ("a", "b"), True)
    assert settings.from_args(_Config, args, steps=9).steps == 9  # what the command computes wins
    assert "(default: 64)" in " ".join(parser.format_help().split())


def test_manifest_keys_and_command_line_round_trip():
    config = _Config(out="o", size=48, names=("a",), guides=True)
    assert settings.manifest(config) == {"out": "o", "size": 48, "num_inference_steps": 20, "names": ("a",)}
    line = settings.command_line(config)
    assert line == ["--out o", "--size 48", "--steps 20", "--names a", "--guides"]
    assert settings.from_args(_Config, _parser().parse_args(shlex.split(" ".join(line)))) == config


def test_world_command_round_trips_through_its_own_command_line():
    from concept_grounding.commands import world as world_command

    config = WorldExportConfig(
        WorldConfig(image_size=48, class_names=("017.Cardinal", "073.Blue_Jay"), seed=3, deviation_rate=0.25),
        train_per_class=2,
        test_per_class=0,
        formats="all",
    )
    parser = argparse.ArgumentParser()
    world_command.add_arguments(parser)
    text = config.command().removeprefix("concept-grounding world ")
    assert world_command.config_from_args(parser.parse_args(shlex.split(text))) == config


def test_world_command_defaults_are_the_configs_defaults():
    from concept_grounding.commands import world as world_command

    parser = argparse.ArgumentParser()
    world_command.add_arguments(parser)
    assert world_command.config_from_args(parser.parse_args(["--out", "w"])) == WorldExportConfig()
    assert world_command.config_from_args(parser.parse_args(["--out", "w", "--classes"])).world.class_names is None
    assert (
        world_command.config_from_args(parser.parse_args(["--out", "w", "--world-size", "40"])).world.image_size == 40
    )


@dataclass(frozen=True)
class _Rules:
    low: float = setting(0.5, "lowest share", parse=float, manifest_key="min_share")
    names: tuple[str, ...] = setting(("a",), "names", nargs="+", convert=tuple)


@dataclass(frozen=True)
class _Outer:
    seed: int | None = setting(0, "seed", parse=int, switches=(("--unseeded", None),))
    rules: _Rules = settings.nested(_Rules)


def test_a_nested_config_contributes_its_flags_and_is_built_from_them():
    parser = _parser(_Outer)
    assert settings.from_args(_Outer, parser.parse_args([])) == _Outer()
    config = settings.from_args(_Outer, parser.parse_args(["--low", "0.9", "--names", "b", "c", "--seed", "4"]))
    assert config == _Outer(seed=4, rules=_Rules(low=0.9, names=("b", "c")))
    assert settings.flags(_Outer) == {"seed": "--seed", "low": "--low", "names": "--names"}
    assert settings.manifest(config) == {"seed": 4, "min_share": 0.9, "names": ("b", "c")}
    line = settings.command_line(config)
    assert line == ["--seed 4", "--low 0.9", "--names b c"]
    assert settings.from_args(_Outer, parser.parse_args(shlex.split(" ".join(line)))) == config
    assert settings.default(_Outer, "low") == 0.5
    assert _parser(_Outer, defaults={"low": 0.7}).parse_args([]).low == 0.7
    assert _parser(_Outer, defaults=_Outer(rules=_Rules(low=0.6))).parse_args([]).low == 0.6


def test_a_deprecated_switch_sets_its_settings_value_and_warns():
    parser = _parser(_Outer)
    with pytest.warns(FutureWarning, match="--unseeded is deprecated; use --seed none"):
        assert parser.parse_args(["--unseeded"]).seed is None
    assert "--unseeded" not in parser.format_help()


@pytest.mark.parametrize(
    ("clash", "message"),
    [
        (dict(low=setting(1.0, "also low", parse=float)), "_Rules.low and _Clash.low share the name low"),
        (dict(other=setting(1, "x", flag="--names")), "_Rules.names and _Clash.other share the flag --names"),
        (dict(other=setting(1, "x", aliases=("--seed",))), "_Clash.other and _Clash.seed share the flag --seed"),
    ],
)
def test_a_duplicate_flag_or_destination_is_refused_naming_both_fields(clash, message):
    import dataclasses

    fields = [
        ("seed", int, setting(0, "seed", parse=int)),
        *[(k, int, v) for k, v in clash.items()],
        ("rules", _Rules, settings.nested(_Rules)),
    ]
    config = dataclasses.make_dataclass("_Clash", fields, frozen=True)
    with pytest.raises(TypeError, match=message.replace(".", r"\.")):
        _parser(config)


def test_an_undeclared_name_has_no_flag():
    with pytest.raises(KeyError):
        settings.flag(_Config, "internal")


def test_bench_command_defaults_are_the_configs_defaults_and_flags_reach_their_fields():
    from concept_grounding.bench.config import BenchConfig
    from concept_grounding.commands import bench as bench_command
    from concept_grounding.world.config import WorldConfig as World

    parser = argparse.ArgumentParser()
    bench_command.add_arguments(parser)
    assert bench_command.config_from_args(parser.parse_args([])) == BenchConfig()
    config = bench_command.config_from_args(
        parser.parse_args(
            [
                "--image-size",
                "48",
                "--classes",
                "Blue Jay",
                "Cardinal",
                "--seed",
                "2",
                "--no-clip",
                "--models",
                "CEM",
                "--concepts",
                "all",
                "--min-class-count",
                "3",
            ]
        )
    )
    assert config == BenchConfig(
        world=World(image_size=48, class_names=("073.Blue_Jay", "017.Cardinal"), seed=2),
        clip=False,
        models=("CEM",),
        concepts="all",
        min_class_count=3,
    )


def test_candidates_world_side_is_size_and_its_old_spelling_still_parses():
    from concept_grounding.commands import candidates

    parser = argparse.ArgumentParser()
    candidates.add_arguments(parser)
    assert parser.parse_args(["classes", "--size", "48"]).world_size == 48
    assert parser.parse_args(["attributes", "--world-size", "40"]).world_size == 40
    assert parser.parse_args(["classes"]).world_size is None


def test_sub_world_side_is_size_beside_the_models_input_side():
    from concept_grounding.commands import sub

    parser = argparse.ArgumentParser()
    sub.add_arguments(parser)
    assert parser.parse_args(["--model", "m", "--size", "48"]).world_size == 48
    assert parser.parse_args(["--model", "m", "--world-size", "40", "--image-size", "224"]).world_size == 40
    assert "--world-size" not in parser.format_help()


def test_generate_flags_come_from_generate_config_and_resume_messages_name_them():
    from concept_grounding.commands import generate
    from concept_grounding.tdg.generate_config import GenerateConfig
    from concept_grounding.tdg.resume import MANIFEST_ARGUMENTS

    parser = argparse.ArgumentParser()
    generate.add_arguments(parser)
    config = generate.config_from_args(parser.parse_args(["--out", "g"]))
    plain = {s.name: getattr(config, s.name) for s in settings.settings_of(GenerateConfig)}
    assert plain == {s.name: getattr(GenerateConfig(out="g"), s.name) for s in settings.settings_of(GenerateConfig)}
    config = generate.config_from_args(
        parser.parse_args(
            ["--out", "g", "--steps", "3", "--classes", "Blue Jay", "--t-min", "0.3", "--save-guides", "--size", "48"]
        )
    )
    assert (config.num_inference_steps, config.classes, config.t_min, config.save_guides, config.size) == (
        3,
        ("073.Blue_Jay",),
        0.3,
        True,
        48,
    )
    assert (
        MANIFEST_ARGUMENTS["num_inference_steps"] == "--steps" == settings.flag(GenerateConfig, "num_inference_steps")
    )
    assert MANIFEST_ARGUMENTS["schedule"] == "--t-min/--t-max/--k"


def test_filter_flags_come_from_filter_config():
    from concept_grounding.commands import filter as filter_command
    from concept_grounding.tdg.filter_job import FilterConfig

    parser = argparse.ArgumentParser()
    filter_command.add_arguments(parser)
    args = parser.parse_args(["--out", "f", "--scorer", "tiny-clip", "--keep-fraction", "0.5"])
    assert filter_command.config_from_args(args) == FilterConfig(
        input=None, out=Path("f"), scorer="tiny-clip", keep_fraction=0.5
    )
    with pytest.raises(SystemExit):
        parser.parse_args(["--out", "f", "--keep-fraction", "0"])  # (0, 1]: the declared validator


def test_explain_flags_come_from_explain_config():
    from concept_grounding.cci.explain_job import ExplainConfig
    from concept_grounding.commands import explain

    parser = argparse.ArgumentParser()
    explain.add_arguments(parser)
    assert explain.config_from_args(parser.parse_args(["--out", "e"])) == ExplainConfig()
    assert explain.config_from_args(parser.parse_args(["--out", "e", "--texts"])).texts is None
    config = explain.config_from_args(
        parser.parse_args(
            ["--out", "e", "--num", "2", "--texts", "a bird", "--baselines", "--method", "hook", "--size", "48"]
        )
    )
    assert config == ExplainConfig(num=2, texts=["a bird"], baselines=True, method="hook", size=48)
    with pytest.raises(SystemExit):
        parser.parse_args(["--out", "e", "--size", "44"])  # a multiple of 8: the declared validator


def test_covar_flags_come_from_covar_config_and_the_judge_follows_images(tmp_path):
    from concept_grounding.cci.covar_config import CovarConfig
    from concept_grounding.commands import covar

    parser = argparse.ArgumentParser()
    covar.add_arguments(parser)
    assert covar.config_from_args(parser.parse_args(["--out", "c"])) == CovarConfig()
    config = covar.config_from_args(
        parser.parse_args(["--out", "c", "--images", str(tmp_path), "--steps", "3", "--inpaint-prompts", "a beach"])
    )
    assert (config.judge, config.images, config.steps, config.inpaint_prompts) == (
        "text",
        str(tmp_path),
        3,
        ("a beach",),
    )


def test_train_flux_flags_come_from_its_config_and_tiny_overrides_the_sizes():
    from concept_grounding.commands import train_flux
    from concept_grounding.worldflux import FluxTrainConfig
    from concept_grounding.worldflux.job import TrainFluxJobConfig

    parser = argparse.ArgumentParser()
    train_flux.add_arguments(parser)
    config = train_flux.config_from_args(parser.parse_args(["--out", "o", "--work-dir", "w"]))
    assert config == TrainFluxJobConfig(work_dir=Path("w"), out=Path("o"))
    assert config.training_config() == FluxTrainConfig()  # the command's defaults are the trainer's
    config = train_flux.config_from_args(
        parser.parse_args(
            ["--out", "o", "--work-dir", "w", "--vae-blocks", "8,16", "--size", "64", "--no-progress", "--seed", "3"]
        )
    )
    assert (config.train.vae_blocks, config.progress) == ((8, 16), False)
    trained = config.training_config()
    assert (trained.vae_blocks, trained.world.image_size, trained.world.seed) == ((8, 16), 64, 3)
    tiny = train_flux.config_from_args(parser.parse_args(["--out", "o", "--work-dir", "w", "--tiny", "--size", "64"]))
    assert tiny.training_config().world.image_size == 32 and len(tiny.training_config().world.class_names) == 2
    with pytest.raises(SystemExit):
        parser.parse_args(["--out", "o", "--work-dir", "w", "--vae-blocks", "8,-1"])  # the declared validator
    # one parse: the nested training config is checked on the world it trains on (64 px is a multiple of the
    # 6-block VAE's 64, the 32-px default world is not)
    deep = ["--out", "o", "--work-dir", "w", "--vae-blocks", "4,4,4,4,4,4"]
    assert train_flux.config_from_args(parser.parse_args([*deep, "--size", "64"])).train.world.image_size == 64
    with pytest.raises(ValueError, match="image_size must be a multiple of 64"):
        train_flux.config_from_args(parser.parse_args(deep))


def test_curate_holds_one_curation_rules_and_world_seed_none_is_not_the_world(tmp_path):
    from concept_grounding.commands import curate
    from concept_grounding.curation.curate_inputs import CurateConfig
    from concept_grounding.curation.rules import CurationRules

    (tmp_path / "a.db").touch()
    parser = argparse.ArgumentParser()
    curate.add_arguments(parser)
    given = ["--out", str(tmp_path / "o"), "--candidates", str(tmp_path), "--annotations", str(tmp_path / "a.db")]
    config = settings.from_args(CurateConfig, parser.parse_args(given))
    assert config == CurateConfig(tmp_path, tmp_path / "a.db") and config.world_seed == 0
    assert config.rules == CurationRules(0.9, 0.5, 0.5)  # SUB App. E's thresholds
    config = settings.from_args(
        CurateConfig, parser.parse_args([*given, "--min-yes", "0.8", "--world-seed", "none", "--max-deviation", "0.25"])
    )
    assert (config.rules, config.world_seed) == (CurationRules(0.8, 0.5, 0.25), None)
    line = shlex.split(" ".join(settings.command_line(config)))
    assert "--world-seed" in line and line[line.index("--world-seed") + 1] == "none"
    assert settings.from_args(CurateConfig, parser.parse_args(["--out", "o", *line])) == config
    with pytest.warns(FutureWarning, match="--not-world is deprecated; use --world-seed none"):
        assert settings.from_args(CurateConfig, parser.parse_args([*given, "--not-world"])).world_seed is None
    assert settings.from_args(CurateConfig, parser.parse_args([*given, "--world-seed", "7"])).world_seed == 7
    with pytest.raises(SystemExit):
        parser.parse_args([*given, "--min-yes", "1.5"])  # the nested setting keeps its validator
    assert settings.manifest(config)["min_yes"] == 0.8 and "rules" not in settings.manifest(config)


def test_publish_flags_come_from_its_config_and_build_the_same_publish_config():
    from concept_grounding.commands import publish
    from concept_grounding.publish import PublishConfig
    from concept_grounding.publish.job import PublishJobConfig

    parser = argparse.ArgumentParser()
    publish.add_arguments(parser)
    config = publish.config_from_args(parser.parse_args(["--namespace", "me", "--out", "hub"]))
    assert config == PublishJobConfig(namespace="me", out=Path("hub"))
    argv = ["--namespace", "me", "--out", "hub", "--size", "64", "--classes", "017.Cardinal", "--seed", "2", "--push"]
    config = publish.config_from_args(parser.parse_args(argv))
    assert (config.classes, config.push, config.token) == (("017.Cardinal",), True, None)
    assert config.publish_config() == PublishConfig.from_flags(
        "me",
        Path("hub"),
        size=64,
        train_per_class=10,
        test_per_class=5,
        per_pairing=1,
        seed=2,
        deviation_rate=0.1,
        classes=["017.Cardinal"],
    )
    with pytest.raises(ValueError, match="^--size: must be an integer >= 32, got 8$"):
        publish.config_from_args(
            parser.parse_args(["--namespace", "me", "--out", "hub", "--size", "8"])
        ).publish_config()


def test_space_controls_start_where_the_commands_flags_do():
    """The Space's controls take their defaults from the same declarations."""
    from concept_grounding.cci.explain_job import ExplainConfig
    from concept_grounding.space import tab_explain, tab_tdg
    from concept_grounding.tdg.generate_config import GenerateConfig

    assert tab_explain.DEFAULT_CLUSTERS == settings.default(ExplainConfig, "clusters") == 7
    assert settings.default(GenerateConfig, "seed") == tab_tdg.DEFAULT_SEED
    with pytest.raises(KeyError, match="not a setting"):
        settings.default(ExplainConfig, "images")

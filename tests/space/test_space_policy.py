"""The Space's model policy: visitors load only models listed at launch, and visitor-chosen
models live in a bounded LRU cache."""

import argparse
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from concept_grounding.commands.space import add_arguments, policy_from_args
from concept_grounding.errors import UsageError
from concept_grounding.space import tab_explain, tab_tdg
from concept_grounding.space.inputs import UserInputError
from concept_grounding.space.policy import ModelPolicy
from concept_grounding.space.resources import ResourceStore


def _counting_builder(counts, name):
    def build(store):
        counts[name] = counts.get(name, 0) + 1
        return {"model": name, "build": counts[name]}, f"built {name}"

    return build


def test_only_listed_models_pass_unless_any_is_allowed():
    policy = ModelPolicy(tdg_models=("org/flux", " /srv/flux "), clip_models=("ViT-B-32",))
    assert policy.tdg_models == ("org/flux", "/srv/flux")
    assert policy.check("tdg", "/srv/flux ") == "/srv/flux"
    assert policy.check("clip", "ViT-B-32") == "ViT-B-32"
    for kind, name in (("tdg", "ViT-B-32"), ("clip", "org/flux"), ("tdg", "/"), ("clip", "../../etc")):
        with pytest.raises(UserInputError, match="does not load the"):
            policy.check(kind, name)
    with pytest.raises(UserInputError, match="--clip-model"):
        ModelPolicy().check("clip", "anything")
    with pytest.raises(UserInputError, match="not a valid name"):
        ModelPolicy(allow_any=True).check("tdg", "a\nb")
    with pytest.raises(UserInputError, match="Name a Flux model"):
        policy.check("tdg", "  ")
    assert ModelPolicy(allow_any=True).check("clip", "any/repo") == "any/repo"
    with pytest.raises(ValueError, match="cache_size"):
        ModelPolicy(cache_size=0)


def test_policy_from_environment_and_flags(monkeypatch):
    monkeypatch.setenv("CONCEPT_GROUNDING_TDG_MODEL", "a/flux, b/flux,")
    monkeypatch.setenv("CONCEPT_GROUNDING_CLIP_MODELS", "ViT-B-32")
    monkeypatch.setenv("CONCEPT_GROUNDING_MODEL_CACHE", "3")
    monkeypatch.delenv("CONCEPT_GROUNDING_ALLOW_ANY_MODEL", raising=False)
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    env_only = policy_from_args(parser.parse_args([]))
    assert env_only == ModelPolicy(("a/flux", "b/flux"), ("ViT-B-32",), allow_any=False, cache_size=3)
    flags = policy_from_args(
        parser.parse_args(["--tdg-model", "c/flux", "--tdg-model", "d", "--allow-any-model", "--model-cache", "1"])
    )
    assert flags == ModelPolicy(("c/flux", "d"), ("ViT-B-32",), allow_any=True, cache_size=1)
    monkeypatch.setenv("CONCEPT_GROUNDING_ALLOW_ANY_MODEL", "1")
    assert policy_from_args(parser.parse_args([])).allow_any
    monkeypatch.setenv("CONCEPT_GROUNDING_MODEL_CACHE", "zero")
    with pytest.raises(UsageError, match="CONCEPT_GROUNDING_MODEL_CACHE must be an integer >= 1"):
        policy_from_args(parser.parse_args([]))


def test_bad_launch_flags_fail_at_parse_time(capsys):
    from concept_grounding.cli import main

    for argv, needle in (
        (["space", "--model-cache", "0"], "--model-cache"),
        (["space", "--port", "-1"], "--port"),
        (["space", "--port", "99999"], "--port: must be an integer in [0, 65535]"),
    ):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert needle in err and "Traceback" not in err and "internal error" not in err


def test_a_port_in_use_is_refused_before_the_space_is_built(capsys, monkeypatch):
    """The address is checked first, in one line naming the flags."""
    import socket

    from concept_grounding.cli import main
    from concept_grounding.space import blocks

    monkeypatch.setattr(blocks, "build_demo", lambda *a, **k: pytest.fail("the Space was built"))
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(["space", "--port", str(port)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"concept-grounding: error: --host/--port: cannot listen on 127.0.0.1:{port}")
    assert len(err.splitlines()) == 1


def test_lru_keeps_at_most_cache_size_visitor_models_and_never_drops_builtins():
    counts: dict[str, int] = {}
    store = ResourceStore(policy=ModelPolicy(cache_size=2))
    store.get("world", _counting_builder(counts, "world"))
    for name in ("a", "b", "c"):  # c drops a, the least recently used
        store.get(name, _counting_builder(counts, name), evictable=True)
    assert store.cached_models() == ["b", "c"] and not store.is_ready("a") and store.is_ready("world")
    store.get("b", _counting_builder(counts, "b"), evictable=True)  # b is now the most recent
    store.get("d", _counting_builder(counts, "d"), evictable=True)  # so d drops c
    assert store.cached_models() == ["b", "d"]
    again = store.get("a", _counting_builder(counts, "a"), evictable=True)  # rebuilt, drops b
    assert again == {"model": "a", "build": 2} and store.cached_models() == ["d", "a"]
    assert counts == {"world": 1, "a": 2, "b": 1, "c": 1, "d": 1}
    assert set(store.status()) == {"world", "d", "a"}
    assert "Visitor-chosen models loaded: 2 of at most 2" in store.status_markdown()


def test_lru_under_concurrent_requests():
    """Eight threads ask for four models in turn with room for two: every request gets
    the model it asked for, and the cache never holds more than two."""
    counts: dict[str, int] = {}
    lock = threading.Lock()
    store = ResourceStore(policy=ModelPolicy(cache_size=2))
    sizes = []

    def build_for(name):
        def build(_store):
            with lock:
                counts[name] = counts.get(name, 0) + 1
            return name, "built"

        return build

    def worker(i):
        for j in range(40):
            name = "abcd"[(i + j) % 4]
            assert store.get(name, build_for(name), evictable=True) == name
            sizes.append(len(store.cached_models()))

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(worker, range(8)))
    assert max(sizes) <= 2 and len(store.cached_models()) == 2
    assert sum(counts.values()) >= 4


def test_tdg_tab_refuses_unlisted_models_before_loading(tmp_path):
    store = ResourceStore(policy=ModelPolicy(tdg_models=(str(tmp_path / "listed-but-missing"),)))
    with pytest.raises(UserInputError, match="does not load the Flux model '/etc'"):
        tab_tdg.get_pipeline(store, "/etc")
    assert store.status() == {}
    with pytest.raises(UserInputError, match="Could not load the Flux model"):
        tab_tdg.get_pipeline(store, str(tmp_path / "listed-but-missing"))
    assert tab_tdg.model_choices(store.policy) == [
        tab_tdg.WORLD_MODEL,
        tab_tdg.TINY_MODEL,
        str(tmp_path / "listed-but-missing"),
    ]


def test_named_clips_share_the_lru_cache(tmp_path):
    """Two listed CLIP folders with room for one: loading the second drops the first; the
    default world CLIP is not a visitor-chosen model and is never dropped."""
    from concept_grounding.models.clip import WordTokenizer, WorldCLIP

    folders = []
    for i in range(2):
        folder = tmp_path / f"clip-{i}"
        WorldCLIP(
            WordTokenizer.from_vocabulary().words,
            image_size=32,
            patch_size=8,
            vision_width=32,
            text_width=32,
            vision_layers=1,
            text_layers=1,
            head_width=16,
        ).save_pretrained(folder)
        folders.append(str(folder))
    store = ResourceStore(policy=ModelPolicy(clip_models=tuple(folders), cache_size=1))
    first = tab_explain.get_model(store, folders[0])
    assert tab_explain.get_model(store, folders[0]) is first and store.cached_models() == [f"clip:{folders[0]}"]
    tab_explain.get_model(store, folders[1])
    assert store.cached_models() == [f"clip:{folders[1]}"] and not store.is_ready(f"clip:{folders[0]}")
    assert tab_explain.get_model(store, folders[0]) is not first  # loaded again after being dropped
    assert tab_explain.model_choices(store) == [("world CLIP (default)", "")] + [(f, f) for f in folders]


def test_a_gpu_space_offers_flux_dev_and_klein_and_a_cpu_space_does_not():
    """On ZeroGPU hardware (``SPACES_ZERO_GPU``) the TDG tab offers FLUX.1-dev and
    FLUX.2 [klein] beside the built-in models; on this CPU nothing changes."""
    import torch

    from concept_grounding.space import tab_tdg
    from concept_grounding.tdg.zerogpu import GPU_TDG_MODELS

    gpu = ModelPolicy.from_env({"SPACES_ZERO_GPU": "true", "CONCEPT_GROUNDING_TDG_MODEL": "my/flux"})
    assert gpu.offered("tdg") == ("my/flux", *GPU_TDG_MODELS)
    assert set(GPU_TDG_MODELS) <= set(tab_tdg.model_choices(gpu))
    if not torch.cuda.is_available():
        assert ModelPolicy.from_env({}).offered("tdg") == ()
    from concept_grounding.tdg.zerogpu import _spaces_gpu

    if _spaces_gpu() is None:  # spaces.GPU only where the package is installed (not the repository's spaces/ folder)
        assert tab_tdg.generate.__module__ == tab_tdg.__name__ and not hasattr(tab_tdg.generate, "__wrapped__")

"""``concept-grounding publish``: build every Hub repo as a folder, offline; ``--push`` uploads them.

See :mod:`concept_grounding.publish` for the repos and the folder layout. Every check
(namespace and repo names, ``--bench``, ``--out``, the token with ``--push``) runs
before anything is rendered or written.
"""

from __future__ import annotations

import argparse
from pathlib import Path

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--namespace", required=True, help="Hub user or organisation that owns the repos")
    parser.add_argument("--out", required=True, type=Path,
                        help="folder for one sub-folder per repo (new, empty, or made by an earlier publish)")
    parser.add_argument("--bench", type=Path, default=None,
                        help="a `concept-grounding bench` run folder (e.g. reports/demo/bench) whose models to publish "
                        "(default: none, no model repos)")
    world = parser.add_argument_group("bird world datasets (the `concept-grounding world` settings)")
    world.add_argument("--size", type=int, default=128, help="image side in pixels (>= 32)")
    world.add_argument("--train-per-class", type=int, default=10, help="training images per class")
    world.add_argument("--test-per-class", type=int, default=5, help="test images per class")
    world.add_argument("--per-pairing", type=int, default=1, help="SUB-style images per (class, attribute) pairing")
    world.add_argument("--seed", type=int, default=0, help="world seed")
    world.add_argument("--deviation-rate", type=float, default=0.1, help="per-image, per-group label deviation rate")
    world.add_argument("--classes", nargs="*", default=None, help="CUB class folder names (default: SUB's 33)")
    push = parser.add_argument_group("upload")
    push.add_argument("--push", action="store_true", help="create the repos and upload the folders")
    push.add_argument("--token", default=None, help="Hub token (default: $HF_TOKEN or the `hf auth login` token)")
    push.add_argument("--private", action="store_true", help="create new repos as private")


def run(args: argparse.Namespace) -> int:
    import logging

    from concept_grounding.publish import PublishConfig, build_repos, plan_repos, push_repos, resolve_token

    logging.basicConfig(level=logging.INFO, format="%(message)s")
    config = PublishConfig.from_flags(
        args.namespace, args.out, bench=args.bench, size=args.size, train_per_class=args.train_per_class,
        test_per_class=args.test_per_class, per_pairing=args.per_pairing, seed=args.seed,
        deviation_rate=args.deviation_rate, classes=args.classes)
    token = resolve_token(args.token) if args.push else None  # before any work
    plan = plan_repos(config)
    repos = build_repos(config, plan)
    for repo in repos:
        print(f"{repo.repo_type:8s} {repo.repo_id(config.namespace):45s} {repo.folder(config.out)}")
    if args.push:
        from huggingface_hub import HfApi

        results = push_repos(repos, config.namespace, config.out, HfApi(token=token), private=args.private,
                             version=config.version)
        for r in results:
            print(f"pushed {r.repo_type} {r.repo_id}: {r.commit_url}")
    else:
        print(f"built {len(repos)} repos under {config.out}; upload them with the same command and --push")
    return 0

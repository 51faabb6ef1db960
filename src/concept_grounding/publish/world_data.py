"""The bird world as two Hub dataset repos: Parquet shards and a card whose YAML is the schema.

* ``bird-world``: ``train`` / ``test`` in :func:`concept_grounding.schema.cub_features`
  (image, class as ``ClassLabel``, per-image and class-level attributes, the 15 part
  centres with visibility, bounding box, foreground mask and part map).
* ``bird-world-sub``: the world's exact counterfactuals in **SUB's Hub schema**: split
  ``test`` with ``image``, ``bird_label`` (``ClassLabel`` of the CUB folder names) and
  ``attr_label`` (``ClassLabel`` of the substituted attributes spelled ``has_x--y``, as
  ``Jessica-bader/SUB`` spells them), plus two columns SUB lacks and the world knows:
  ``removed_attributes`` (S-, ``has_x--y`` names) and ``source_id`` (the unedited bird's
  index). Code written for SUB (``load_dataset(id, split="test")``, ``ds["attr_label"]``)
  runs unchanged, and :func:`concept_grounding.loaders.load_sub` reads both.

Files follow ``datasets``' own ``push_to_hub`` layout, ``data/<split>-00000-of-00001.parquet``
(image bytes embedded), and the card's YAML declares ``configs`` (data files per split)
and ``dataset_info`` (features, split sizes) through ``datasets``' ``MetadataConfigs`` and
``DatasetInfosDict``, so ``load_dataset(<folder or repo>)`` gives exactly those features.
Rendering is deterministic per seed, and so are the Parquet bytes: a rebuild with the
same settings writes identical files (what lets a re-push upload nothing).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ..fileio import markdown_table
from ..world.export import WorldExportConfig
from .cards import make_card, save_card

if TYPE_CHECKING:
    import datasets

    from ..world import BirdWorld

__all__ = ["WorldSpec", "build_world"]

LICENSE = "apache-2.0"
#: rows per Parquet row group (small images: keeps the viewer's pages light)
_ROW_GROUP = 200
#: bytes of Arrow data per Parquet shard, as ``datasets.config.MAX_SHARD_SIZE``
_MAX_SHARD = 500 << 20


#: The bird world a publish renders: the ``concept-grounding world`` job's own settings.
WorldSpec = WorldExportConfig


def build_world(spec: WorldSpec) -> BirdWorld:
    """The :class:`~concept_grounding.world.BirdWorld` of ``spec``."""
    from ..world import BirdWorld

    return BirdWorld(spec.world)


def hub_attribute_name(name: str) -> str:
    """SUB's Hub spelling of a CUB attribute name.

    >>> hub_attribute_name("has_crown_color::black")
    'has_crown_color--black'
    """
    return name.replace("::", "--")


def sub_hub_schema(sub: datasets.Dataset, class_names: list[str]) -> datasets.Dataset:
    """A :func:`~concept_grounding.schema.sub_features` set in SUB's Hub schema (see the module docstring).

    ``bird_label`` names are ``class_names`` (the world's, in order); ``attr_label``
    names are the targets present, in ``has_x--y`` spelling, sorted.
    """
    import datasets

    targets = sorted({hub_attribute_name(t) for t in sub["target_attribute"]})
    features = datasets.Features(
        {
            "image": datasets.Image(),
            "bird_label": datasets.ClassLabel(names=list(class_names)),
            "attr_label": datasets.ClassLabel(names=targets),
            "removed_attributes": datasets.Sequence(datasets.Value("string")),
            "source_id": datasets.Value("int64"),
        }
    )
    bird = {n: i for i, n in enumerate(class_names)}
    attr = {n: i for i, n in enumerate(targets)}
    raw = sub.cast_column("image", datasets.Image(decode=False))
    return datasets.Dataset.from_dict(
        {
            "image": raw["image"],
            "bird_label": [bird[c] for c in sub["reference_class"]],
            "attr_label": [attr[hub_attribute_name(t)] for t in sub["target_attribute"]],
            "removed_attributes": [[hub_attribute_name(r) for r in rs] for rs in sub["removed_attributes"]],
            "source_id": sub["source_id"],
        },
        features=features,
    )


def write_parquet_splits(splits: dict[str, datasets.Dataset], folder: Path) -> datasets.DatasetInfo:
    """Write each split as ``folder/data/<split>-NNNNN-of-NNNNN.parquet``; returns the info for the card.

    Image bytes are embedded (``datasets.table.embed_table_storage``, as ``push_to_hub``
    does), so the files stand alone.
    """
    import datasets
    from datasets.table import embed_table_storage

    data = Path(folder) / "data"
    data.mkdir(parents=True, exist_ok=True)
    split_dict = datasets.SplitDict()
    features, download = None, 0
    for name, ds in splits.items():
        nbytes = ds.data.nbytes  # Arrow bytes (images embedded), as the Hub reports dataset_size
        num_shards = int(nbytes / _MAX_SHARD) + 1
        for index in range(num_shards):
            shard = ds.shard(num_shards=num_shards, index=index, contiguous=True).with_format("arrow")
            shard = shard.map(
                embed_table_storage, batched=True, batch_size=_ROW_GROUP, keep_in_memory=True, desc=f"embed {name}"
            )
            path = data / f"{name}-{index:05d}-of-{num_shards:05d}.parquet"
            shard.to_parquet(str(path), batch_size=_ROW_GROUP)
            download += path.stat().st_size
        split_dict.add(datasets.SplitInfo(name=name, num_bytes=nbytes, num_examples=len(ds)))
        features = ds.features
    return datasets.DatasetInfo(
        features=features,
        splits=split_dict,
        download_size=download,
        dataset_size=sum(s.num_bytes for s in split_dict.values()),
    )


def _card_data(info: datasets.DatasetInfo, splits: list[str], pretty_name: str, tags: list[str], task: str, n: int):
    from datasets.info import DatasetInfosDict
    from datasets.utils.metadata import MetadataConfigs
    from huggingface_hub import DatasetCardData

    size = "n<1K" if n < 1_000 else "1K<n<10K" if n < 10_000 else "10K<n<100K" if n < 100_000 else "100K<n<1M"
    data = DatasetCardData(
        license=LICENSE,
        pretty_name=pretty_name,
        task_categories=[task],
        size_categories=[size],
        tags=tags,
        language=["en"],
        source_datasets=["original"],
    )
    MetadataConfigs(
        {"default": {"data_files": [{"split": s, "path": f"data/{s}-*"} for s in splits]}}
    ).to_dataset_card_data(data)
    DatasetInfosDict({"default": info}).to_dataset_card_data(data)
    return data


def _how_made(command: str, spec: WorldSpec, version: str) -> str:
    w = spec.world
    classes = ", ".join(w.class_names) if w.class_names else "SUB's 33 classes"
    return (
        "## How it was made\n\n"
        f"Rendered procedurally by `concept-grounding` {version} (`concept_grounding.world`), seed **{w.seed}**; "
        "the same settings give the same bytes. The exact command:\n\n"
        f"```bash\n{command}\n```\n\n"
        f"World settings: {w.image_size} px, {spec.train_per_class} train + {spec.test_per_class} test images "
        f"per class, {spec.per_pairing} counterfactual(s) per (class, substituted attribute) pairing, label deviation "
        f"rate {w.deviation_rate}, classes: {classes}. The same birds as files: `{spec.command()}`.\n"
    )


_WORLD_COLUMNS = [
    ("image_id", "int32", "1-based id, unique across splits"),
    ("file_name", "string", "`<class folder>/<Class>_<index>.png`, as in CUB"),
    ("image", "Image (RGB)", "the rendering"),
    ("label", "ClassLabel", "the species (CUB folder names)"),
    ("attributes", "312 x uint8", "per-image attribute labels (CUB's 312, 0/1), with CUB-like label noise"),
    ("certainty", "312 x uint8", "CUB certainty (always 4 = definitely)"),
    ("class_attributes", "312 x uint8", "class-level attribute vector (the CBM majority-vote labels)"),
    ("part_xy", "15 x 2 float32", "the 15 CUB part centres (x, y) in pixels"),
    ("part_visible", "15 x bool", "part visibility"),
    ("bbox", "4 x float32", "bounding box (x, y, width, height) in pixels"),
    ("mask", "Image (L)", "foreground mask, 255 = bird"),
    ("part_map", "Image (L)", "per-pixel part id + 1 (0 = no part)"),
    ("is_train", "bool", "CUB's train/test flag"),
]


def build_world_dataset(
    world: BirdWorld, spec: WorldSpec, folder: Path, repo_id: str, sub_repo_id: str, command: str, version: str
) -> datasets.DatasetDict:
    """Render the train/test splits into ``folder`` (Parquet + card); returns them."""
    from huggingface_hub import DatasetCard

    from ..vocabulary import load_vocabulary

    dd = world.to_dataset_dict(spec.train_per_class, spec.test_per_class)
    info = write_parquet_splits(dict(dd), folder)
    n = sum(len(s) for s in dd.values())
    data = _card_data(
        info,
        list(dd),
        "Bird world (concept-grounding)",
        ["concepts", "cub-200-2011", "synthetic", "part-annotations", "segmentation"],
        "image-classification",
        n,
    )
    parts = ", ".join(load_vocabulary().parts)
    body = "\n".join(
        [
            "# Bird world",
            "",
            "Procedurally rendered birds with **exact** ground truth, in the layout of CUB-200-2011: the colours of 13 "
            "body regions, bill shape, breast / tail / wing patterns and more, in varied poses, scenes and lighting. "
            "Each image carries its per-image attribute labels, the class-level attribute vector, the 15 CUB part "
            "centres with visibility, a foreground mask and a part map. It is the world `concept-grounding` checks "
            "every concept metric on before real data; its SUB-style counterfactuals are "
            f"[`{sub_repo_id}`](https://huggingface.co/datasets/{sub_repo_id}).",
            "",
            markdown_table(["split", "images"], [[s, len(d)] for s, d in dd.items()], spaced=True),
            "",
            f"{world.num_classes} classes: " + ", ".join(f"`{c}`" for c in world.class_names) + ".",
            "",
            "## Columns",
            "",
            markdown_table(
                ["column", "type", "meaning"], [[f"`{a}`", b, c] for a, b, c in _WORLD_COLUMNS], spaced=True
            ),
            "",
            f"Parts, in `part_xy` / `part_visible` order: {parts}. Attribute names are CUB's "
            "(`concept_grounding.load_vocabulary().attributes`).",
            "",
            "## Use",
            "",
            "```python",
            "from datasets import load_dataset",
            "",
            f'world = load_dataset("{repo_id}")',
            'bird = world["train"][0]',
            'print(world["train"].features["label"].int2str(bird["label"]), bird["part_xy"][4])  # crown centre',
            "```",
            "",
            _how_made(command, spec, version),
            "## Licence",
            "",
            "Apache-2.0, like the renderer: the images are synthetic and contain no third-party content.",
        ]
    )
    save_card(make_card(DatasetCard, data, body), folder)
    return dd


def build_sub_dataset(
    world: BirdWorld, spec: WorldSpec, folder: Path, repo_id: str, world_repo_id: str, command: str, version: str
) -> datasets.Dataset:
    """Render the SUB-style counterfactuals into ``folder`` (split ``test``, SUB's Hub schema); returns them."""
    from huggingface_hub import DatasetCard

    sub = sub_hub_schema(world.sub_dataset(per_pairing=spec.per_pairing), list(world.class_names))
    info = write_parquet_splits({"test": sub}, folder)
    data = _card_data(
        info,
        ["test"],
        "Bird world SUB-style counterfactuals (concept-grounding)",
        ["concepts", "counterfactual", "sub", "synthetic"],
        "image-classification",
        len(sub),
    )
    body = "\n".join(
        [
            "# Bird world: SUB-style counterfactuals",
            "",
            f"{len(sub)} exact counterfactuals of the [bird world](https://huggingface.co/datasets/{world_repo_id}): "
            "a bird of the reference class re-rendered with one attribute substituted (S+), everything else unchanged. "
            "It has the schema of SUB's own Hub dataset "
            "([`Jessica-bader/SUB`](https://huggingface.co/datasets/Jessica-bader/SUB), "
            "Bader et al., 2025), so code written for SUB runs on it unchanged.",
            "",
            "## Columns",
            "",
            markdown_table(
                ["column", "type", "meaning", "in SUB"],
                [
                    ["`image`", "Image", "the counterfactual bird", "yes"],
                    ["`bird_label`", "ClassLabel", "reference class (CUB folder names)", "yes"],
                    [
                        "`attr_label`",
                        "ClassLabel",
                        "S+, the substituted attribute, spelled `has_x--y` as in SUB",
                        "yes",
                    ],
                    [
                        "`removed_attributes`",
                        "list of string",
                        "S-: the source bird's values of S+'s group that the edit "
                        "switched off (`has_x--y`); SUB derives S- from class-level labels instead",
                        "no",
                    ],
                    ["`source_id`", "int64", "index of the unedited bird in the world (seed below)", "no"],
                ],
                spaced=True,
            ),
            "",
            "## Use",
            "",
            "```python",
            "from datasets import load_dataset",
            "",
            f'sub = load_dataset("{repo_id}", split="test")          '
            '# as for load_dataset("Jessica-bader/SUB", split="test")',
            'print(sub.features["attr_label"].int2str(sub[0]["attr_label"]))',
            "",
            "from concept_grounding.loaders import load_sub",
            "",
            f'same = load_sub("{repo_id}")   # the project\'s SUB schema, S- taken from removed_attributes',
            "```",
            "",
            _how_made(command, spec, version),
            "## Licence",
            "",
            "Apache-2.0 (synthetic images). SUB itself is described in Bader et al., *SUB: Benchmarking CBM "
            "Generalization via Synthetic Attribute Substitutions* (2025).",
        ]
    )
    save_card(make_card(DatasetCard, data, body), folder)
    return sub

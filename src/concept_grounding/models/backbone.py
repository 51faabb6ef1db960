"""Image backbones that also expose their pre-pooling features: small ones for 32-128 px
images, and the standard CUB backbones (torchvision ResNet-18 / 50, Inception-v3; any timm
model) for real photos.

Both return a :class:`BackboneOutput`: ``pooled`` ``(B, d)`` embeddings (what CAVs and
concept heads read) and ``features``, the map the pooled vector came from: ``(B, d, h, w)``
for :class:`SmallCNN` (CoAM's ``E_i``, Aysel et al. Sec. 3) and the patch-token grid
``(B, N, d)`` for :class:`SmallViT`.

>>> import torch
>>> out = SmallCNN()(torch.rand(2, 3, 64, 64))
>>> tuple(out.pooled.shape), tuple(out.features.shape)
((2, 64), (2, 64, 8, 8))
>>> out = SmallViT(image_size=64, patch_size=8)(torch.rand(2, 3, 64, 64))
>>> tuple(out.pooled.shape), tuple(out.features.shape), out.grid_size
((2, 64), (2, 64, 64), (8, 8))

:class:`StandardBackbone` (:mod:`.backbone_standard`) trains the CUB way (Koh et al. 2020's
augmentation) with every trainer here; feed it images resized to ``crop_size * 8 / 7``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from huggingface_hub import PyTorchModelHubMixin
from torch import nn

from .backbone_output import BackboneOutput
from .backbone_standard import (
    STANDARD_ARCHITECTURES,
    StandardBackbone,
    drop_init_weights,
)
from .base import HUB_KWARGS, seeded
from .data import training_tensors
from .pixels import normalize_pixels
from .train_config import TrainConfig, train_settings
from .training import fit, random_hflip

__all__ = [
    "BackboneOutput",
    "SmallCNN",
    "SmallViT",
    "build_backbone",
    "backbone_config",
    "train_backbone",
    "drop_init_weights",
]


_NORMS = ("batch", "group", "none")
_POOLS = ("max", "avg")


def _norm_layer(norm: str, channels: int, groups: int) -> nn.Module:
    if norm == "batch":
        return nn.BatchNorm2d(channels)
    if norm == "group":
        return nn.GroupNorm(groups, channels)
    return nn.Identity()


class SmallCNN(nn.Module, PyTorchModelHubMixin, **HUB_KWARGS, tags=["backbone"]):
    """A plain conv net: per layer 3x3 conv (stride from ``strides``), a normalisation, ReLU;
    then global pooling of the last feature map into ``pooled``.

    With ``groups = G > 1`` every layer is a grouped convolution: the network is ``G``
    independent sub-networks of ``channels[i] / G`` channels that share no weight (the
    per-concept CBM uses one group per concept). The input is repeated ``G`` times.
    BatchNorm and GroupNorm(G) both keep the groups independent (per-channel / per-group
    statistics).

    Args:
        channels: output channels of each conv layer (all divisible by ``groups``).
        strides: stride of each layer; the default maps 64 px to an 8 x 8 grid.
        groups: number of weight-independent sub-networks.
        norm: ``"batch"`` (BatchNorm2d, the default: trains several times faster on the
            world than GroupNorm), ``"group"`` (GroupNorm with ``groups`` groups, batch-size
            independent) or ``"none"``.
        pool: ``"max"`` (global max pooling, the default: a part's colour or pattern is a
            small, localised signal that averaging over the whole map dilutes) or
            ``"avg"`` (global average pooling, GAP).
        downsample: average-pool the input by this factor before the first layer
            (parameter-free; the per-concept CBM uses 2 to make its ``G`` networks affordable).
    """

    kind = "cnn"

    def __init__(
        self,
        channels: Sequence[int] = (32, 32, 64, 64),
        strides: Sequence[int] = (2, 2, 2, 1),
        groups: int = 1,
        norm: str = "batch",
        pool: str = "max",
        downsample: int = 1,
    ) -> None:
        super().__init__()
        channels, strides = [int(c) for c in channels], [int(s) for s in strides]
        if norm not in _NORMS:
            raise ValueError(f"norm must be one of {_NORMS}, got {norm!r}")
        if int(downsample) < 1:
            raise ValueError(f"downsample must be >= 1, got {downsample}")
        self.downsample = int(downsample)
        if pool not in _POOLS:
            raise ValueError(f"pool must be one of {_POOLS}, got {pool!r}")
        if len(channels) != len(strides) or not channels:
            raise ValueError(f"channels and strides must be non-empty and equally long, got {channels}, {strides}")
        if groups < 1 or any(c % groups for c in channels):
            raise ValueError(f"every entry of channels {channels} must be divisible by groups={groups}")
        self.groups = int(groups)
        self.embed_dim = channels[-1]
        layers: list[nn.Module] = []
        previous = 3
        for i, (c, s) in enumerate(zip(channels, strides)):
            # The first layer reads the same 3 input channels in every group: a dense conv
            # 3 -> c is exactly G independent 3 -> c/G convs (no input repeat needed).
            layers += [
                nn.Conv2d(
                    previous, c, 3, stride=s, padding=1, groups=1 if i == 0 else self.groups, bias=norm == "none"
                ),
                _norm_layer(norm, c, self.groups),
                nn.ReLU(inplace=True),
            ]
            previous = c
        self.layers = nn.Sequential(*layers)
        self.pool = pool
        self._config = {
            "kind": "cnn",
            "channels": channels,
            "strides": strides,
            "groups": self.groups,
            "norm": norm,
            "pool": pool,
            "downsample": self.downsample,
        }

    def get_config(self) -> dict[str, Any]:
        """JSON config such that ``build_backbone(config)`` rebuilds this architecture."""
        return dict(self._config)

    def forward(self, images: torch.Tensor) -> BackboneOutput:
        """images ``(B, 3, H, W)`` in [0, 1] -> pooled ``(B, d)``, features ``(B, d, h, w)``."""
        x = normalize_pixels(images)
        if self.downsample > 1:
            x = nn.functional.avg_pool2d(x, self.downsample, ceil_mode=True)
        if self.groups > 1:  # grouped convs run about twice as fast channels-last on CPU
            x = x.contiguous(memory_format=torch.channels_last)
        features = self.layers(x)
        pooled = features.amax(dim=(2, 3)) if self.pool == "max" else features.mean(dim=(2, 3))
        return BackboneOutput(pooled, features, (features.shape[2], features.shape[3]))


class SmallViT(nn.Module, PyTorchModelHubMixin, **HUB_KWARGS, tags=["backbone"]):
    """A small pre-norm Vision Transformer: patch embedding, a CLS token, learned positions,
    ``depth`` encoder layers, final LayerNorm; ``pooled`` is the CLS token and ``features``
    the ``N = (image_size / patch_size)^2`` patch tokens after the final norm.
    """

    kind = "vit"

    def __init__(
        self,
        image_size: int = 64,
        patch_size: int = 8,
        width: int = 64,
        depth: int = 2,
        heads: int = 4,
        mlp_ratio: float = 2.0,
    ) -> None:
        super().__init__()
        if image_size % patch_size:
            raise ValueError(f"image_size {image_size} must be divisible by patch_size {patch_size}")
        if width % heads:
            raise ValueError(f"width {width} must be divisible by heads {heads}")
        self.image_size, self.patch_size = int(image_size), int(patch_size)
        self.grid = self.image_size // self.patch_size
        self.embed_dim = int(width)
        self.patch_embed = nn.Conv2d(3, width, patch_size, stride=patch_size)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, width))
        self.pos_embed = nn.Parameter(torch.randn(1, self.grid * self.grid + 1, width) * 0.02)
        layer = nn.TransformerEncoderLayer(
            width, heads, int(width * mlp_ratio), dropout=0.0, activation="gelu", batch_first=True, norm_first=True
        )
        self.encoder = nn.TransformerEncoder(layer, depth, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(width)
        self._config = {
            "kind": "vit",
            "image_size": self.image_size,
            "patch_size": self.patch_size,
            "width": self.embed_dim,
            "depth": int(depth),
            "heads": int(heads),
            "mlp_ratio": float(mlp_ratio),
        }

    def get_config(self) -> dict[str, Any]:
        """JSON config such that ``build_backbone(config)`` rebuilds this architecture."""
        return dict(self._config)

    def forward(self, images: torch.Tensor) -> BackboneOutput:
        """images ``(B, 3, S, S)`` in [0, 1], ``S = image_size`` -> pooled ``(B, d)``, patches ``(B, N, d)``."""
        if images.shape[-2:] != (self.image_size, self.image_size):
            raise ValueError(f"SmallViT expects {self.image_size} px images, got {tuple(images.shape[-2:])}")
        x = self.patch_embed(normalize_pixels(images)).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], dim=1) + self.pos_embed
        x = self.norm(self.encoder(x))
        return BackboneOutput(x[:, 0], x[:, 1:], (self.grid, self.grid))


_KINDS = {"cnn": SmallCNN, "vit": SmallViT}


def _is_standard(kind: str) -> bool:
    return kind in STANDARD_ARCHITECTURES or str(kind).startswith("timm:")


def backbone_config(
    backbone: str | dict[str, Any] | None = None, image_size: int = 64, **overrides: Any
) -> dict[str, Any]:
    """Normalise ``"cnn"`` / ``"vit"`` / a config dict / ``None`` (= ``"cnn"``) into a full config dict.

    >>> backbone_config("vit", image_size=32)["image_size"]
    32
    """
    if backbone is None:
        backbone = "cnn"
    config = {"kind": backbone} if isinstance(backbone, str) else dict(backbone)
    kind = config.get("kind", "cnn")
    if _is_standard(kind):  # validated without building (a ResNet-50 costs a second)
        config.update(overrides)
        unknown = set(config) - {"kind", "crop_size", "weights", "augment"}
        if unknown:
            raise ValueError(f"unknown option(s) {sorted(unknown)} for backbone {kind!r}")
        if kind in STANDARD_ARCHITECTURES:
            config.setdefault("crop_size", STANDARD_ARCHITECTURES[kind][1])
        return config
    if kind not in _KINDS:
        raise ValueError(
            f"unknown backbone kind {kind!r}; choose one of {sorted(_KINDS)}, "
            f"{sorted(STANDARD_ARCHITECTURES)} or 'timm:<name>'"
        )
    if kind == "vit":
        config.setdefault("image_size", int(image_size))
    config.update(overrides)
    return build_backbone(config).get_config()


def build_backbone(config: dict[str, Any] | str | None = None) -> SmallCNN | SmallViT | StandardBackbone:
    """A backbone from a config dict ``{"kind": "cnn" | "vit" | "resnet18" | "resnet50" |
    "inception_v3" | "timm:<name>", ...}``: randomly initialised, or from ``weights`` (standard kinds).

    >>> import torch
    >>> net = build_backbone({"kind": "resnet18", "crop_size": 64}).eval()
    >>> out = net(torch.rand(2, 3, 72, 72))
    >>> tuple(out.pooled.shape), tuple(out.features.shape)
    ((2, 512), (2, 512, 2, 2))
    """
    if config is None or isinstance(config, str):
        config = {"kind": config or "cnn"}
    config = dict(config)
    kind = config.pop("kind", "cnn")
    if _is_standard(kind):
        return StandardBackbone(kind, **config)
    if kind not in _KINDS:
        raise ValueError(
            f"unknown backbone kind {kind!r}; choose one of {sorted(_KINDS)}, "
            f"{sorted(STANDARD_ARCHITECTURES)} or 'timm:<name>'"
        )
    return _KINDS[kind](**config)


class _BackboneClassifier(nn.Module):
    def __init__(self, backbone: nn.Module, num_classes: int) -> None:
        super().__init__()
        self.backbone = backbone
        self.head = nn.Linear(backbone.embed_dim, num_classes)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.head(self.backbone(images).pooled)


def train_backbone(
    train_tensors,
    backbone: str | dict[str, Any] | None = "cnn",
    *,
    epochs: int | None = None,
    batch_size: int | None = None,
    lr: float | None = None,
    seed: int | None = None,
    progress: bool | None = None,
    schedule: str = "onecycle",
    augment: bool = True,
    weight_decay: float = 0.0,
    train: TrainConfig | None = None,
) -> SmallCNN | SmallViT:
    """Train a backbone + linear head as a plain (black-box) classifier on the class labels,
    and return the backbone: the frozen ``f`` a post-hoc CBM explains (Aysel et al. use a
    CUB-trained ResNet). ``train_tensors`` is a :class:`~.data.ConceptTensors` (or any
    ``(images, concepts, labels)`` triple); the history is kept in ``backbone.history``.
    Adam with a ``schedule`` (peak ``lr``, default 3e-3) and random horizontal flips
    (``augment``), as the CBMs; ``epochs`` default 10, ``batch_size`` 32, ``seed`` 0, ``progress``
    ``True``, or ``train``: a :class:`~.train_config.TrainConfig` instead of them (a knob given
    both ways is refused).
    """
    knobs = train_settings(train, epochs=epochs, batch_size=batch_size, lr=lr, seed=seed, progress=progress)
    epochs, seed, progress = knobs.epochs, knobs.seed, knobs.progress
    batch_size, lr = knobs.batch_size or 32, 3e-3 if knobs.lr is None else knobs.lr
    images, _, labels, _, num_classes = training_tensors(train_tensors)
    config = backbone_config(backbone, image_size=images.shape[-1])
    with seeded(seed):
        model = _BackboneClassifier(build_backbone(config), num_classes)
    loss = lambda b: nn.functional.cross_entropy(model(b[0]), b[1])  # noqa: E731
    history = fit(
        loss,
        model.parameters(),
        (images, labels),
        epochs=epochs,
        batch_size=batch_size,
        lr=lr,
        seed=seed,
        module=model,
        desc="backbone",
        progress=progress,
        schedule=schedule,
        augment=random_hflip if augment else None,
        weight_decay=weight_decay,
    )
    model.backbone.history = history
    return model.backbone.eval()

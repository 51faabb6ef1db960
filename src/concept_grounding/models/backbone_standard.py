"""The standard CUB backbones: torchvision ResNet-18 / 50, Inception-v3 and any timm model.

:class:`StandardBackbone` (kinds ``"resnet18"``, ``"resnet50"``, ``"inception_v3"``,
``"timm:<name>"``) reads [0, 1] images, normalises them with the ImageNet statistics and,
in training mode, applies the usual CUB augmentation itself (:class:`CUBAugment`, Koh et
al. 2020: random resized crop to ``crop_size``, horizontal flip, brightness and saturation
jitter); in eval mode it takes the centre ``crop_size`` crop, so every trainer (``train_cbm``,
``train_cem``, ``train_backbone``) trains it the CUB way unchanged: feed images resized to
``crop_size * 8 / 7`` (256 for 224, 341 for 299). Its initial weights come from
a local file or a Hub id (:func:`load_backbone_weights`). Build one with
:func:`~concept_grounding.models.backbone.build_backbone`.
"""

from __future__ import annotations

from typing import Any

import torch
from huggingface_hub import PyTorchModelHubMixin
from torch import nn

from .backbone_output import BackboneOutput
from .base import HUB_KWARGS

__all__ = ["drop_init_weights"]

#: torchvision architecture -> (embedding width, Koh et al.'s crop size in px)
STANDARD_ARCHITECTURES: dict[str, tuple[int, int]] = {
    "resnet18": (512, 224),
    "resnet50": (2048, 224),
    "inception_v3": (2048, 299),
}
_IMAGENET_MEAN = (0.485, 0.456, 0.406)
_IMAGENET_STD = (0.229, 0.224, 0.225)


def _centre_crop(images: torch.Tensor, size: int) -> torch.Tensor:
    h, w = images.shape[-2:]
    if h < size or w < size:
        return nn.functional.interpolate(images, size=(size, size), mode="bilinear", align_corners=False)
    top, left = (h - size) // 2, (w - size) // 2
    return images[..., top : top + size, left : left + size]


class CUBAugment(nn.Module):
    """The CUB training augmentation of Koh et al. (2020), per image of a ``(B, 3, H, W)`` batch
    in [0, 1] (torch's global RNG): brightness ``+- 32/255``, saturation ``x [0.5, 1.5]``,
    random resized crop to ``size`` (scale [0.08, 1], ratio [3/4, 4/3], bilinear), horizontal
    flip with probability 0.5. In eval mode: the centre ``size`` crop.

    >>> aug = CUBAugment(8).eval()
    >>> tuple(aug(torch.rand(2, 3, 10, 10)).shape)
    (2, 3, 8, 8)
    """

    def __init__(self, size: int) -> None:
        super().__init__()
        self.size = int(size)

    def _one(self, image: torch.Tensor) -> torch.Tensor:
        from torchvision.transforms import RandomResizedCrop
        from torchvision.transforms import functional as TF

        image = (image + (torch.rand(()) * 2 - 1) * 32 / 255).clamp(0, 1)
        image = TF.adjust_saturation(image, float(0.5 + torch.rand(()))).clamp(0, 1)
        top, left, h, w = RandomResizedCrop.get_params(image, scale=(0.08, 1.0), ratio=(3 / 4, 4 / 3))
        image = TF.resized_crop(image, top, left, h, w, [self.size, self.size], antialias=True)
        return image.flip(-1) if torch.rand(()) < 0.5 else image

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        if not self.training:
            return _centre_crop(images, self.size)
        return torch.stack([self._one(im) for im in images])


def _hub_or_file(weights: str) -> str:
    """A local weights file, or one downloaded from a Hub id ``org/name`` (``model.safetensors``
    or ``pytorch_model.bin``; ``org/name/file`` names the file)."""
    from pathlib import Path

    if Path(weights).expanduser().is_file():
        return str(Path(weights).expanduser())
    parts = weights.removeprefix("hf-hub:").split("/")
    if len(parts) < 2 or weights.startswith(("/", ".", "~")) or "\\" in weights or Path(weights).expanduser().exists():
        raise ValueError(f"weights {weights!r}: not a file and not a Hub id 'org/name[/file]'")
    from huggingface_hub import hf_hub_download

    repo, names = (
        "/".join(parts[:2]),
        (["/".join(parts[2:])] if len(parts) > 2 else ["model.safetensors", "pytorch_model.bin"]),
    )
    errors = []
    for name in names:
        try:
            return hf_hub_download(repo, name)
        except Exception as err:  # noqa: BLE001 - any failure: try the next file, then report all
            errors.append(f"{name}: {type(err).__name__}: {err}")
    raise ValueError(f"weights {weights!r}: no such local file, and the Hub gave none: {'; '.join(errors)}")


def load_backbone_weights(network: nn.Module, weights: str) -> list[str]:
    """Copy a state dict (``.safetensors``, or a torch file holding one) into ``network``,
    ignoring classifier heads (``fc.*``, ``classifier.*``, ``head.*``) and a ``module.`` /
    ``model.`` / ``backbone.`` prefix; returns the keys it could not fill.

    Raises:
        ValueError: the file matches none of the network's weights, or a shape differs.
    """
    path = _hub_or_file(weights)
    if path.endswith(".safetensors"):
        from safetensors.torch import load_file

        state = load_file(path)
    else:
        state = torch.load(path, map_location="cpu", weights_only=True)
        state = state.get("state_dict", state) if isinstance(state, dict) else state
    own = network.state_dict()
    clean: dict[str, torch.Tensor] = {}
    for key, value in state.items():
        for prefix in ("module.", "model.", "backbone.", "net."):
            key = key.removeprefix(prefix)
        if key.split(".")[0] in ("fc", "classifier", "head", "AuxLogits") or key not in own:
            continue
        if tuple(value.shape) != tuple(own[key].shape):
            raise ValueError(
                f"weights {weights!r}: {key} is {tuple(value.shape)}, the network needs {tuple(own[key].shape)}"
            )
        clean[key] = value
    if not clean:
        raise ValueError(f"weights {weights!r}: none of its {len(state)} tensors fits this network")
    network.load_state_dict(clean, strict=False)
    return sorted(set(own) - set(clean))


class StandardBackbone(nn.Module, PyTorchModelHubMixin, **HUB_KWARGS, tags=["backbone"]):
    """A torchvision ResNet-18 / ResNet-50 / Inception-v3 or a timm model (``"timm:<name>"``)
    without its classifier: ``features`` is the last convolutional map ``(B, d, h, w)``,
    ``pooled`` its global average (module docstring for inputs and augmentation).

    Args:
        arch: ``"resnet18"``, ``"resnet50"``, ``"inception_v3"`` or ``"timm:<name>"``.
        crop_size: side (px) of the crop the network sees; default Koh et al.'s (224, or 299
            for Inception-v3).
        weights: initial weights: a local file or a Hub id (:func:`load_backbone_weights`);
            ``None``: random (torchvision's initialisation). Not part of :meth:`get_config`:
            a saved model carries its trained weights.
        augment: apply :class:`CUBAugment` in training mode.
    """

    kind = "standard"

    def __init__(
        self, arch: str = "resnet18", crop_size: int | None = None, weights: str | None = None, augment: bool = True
    ) -> None:
        super().__init__()
        self.arch = str(arch)
        if self.arch.startswith("timm:"):
            import timm

            self.net = timm.create_model(
                self.arch.removeprefix("timm:"), pretrained=False, num_classes=0, global_pool=""
            )
            self.embed_dim = int(self.net.num_features)
            default_crop = int(self.net.pretrained_cfg.get("input_size", (3, 224, 224))[-1])
        elif self.arch in STANDARD_ARCHITECTURES:
            import torchvision

            kwargs = {"aux_logits": False, "init_weights": True} if self.arch == "inception_v3" else {}
            net = getattr(torchvision.models, self.arch)(weights=None, **kwargs)
            net.fc = nn.Identity()
            self.net = net
            self.embed_dim, default_crop = STANDARD_ARCHITECTURES[self.arch]
        else:
            raise ValueError(f"arch must be one of {sorted(STANDARD_ARCHITECTURES)} or 'timm:<name>', got {arch!r}")
        self.crop_size = int(crop_size or default_crop)
        self.augmentation = CUBAugment(self.crop_size) if augment else None
        self.register_buffer("mean", torch.tensor(_IMAGENET_MEAN).view(1, 3, 1, 1), persistent=False)
        self.register_buffer("std", torch.tensor(_IMAGENET_STD).view(1, 3, 1, 1), persistent=False)
        self._config = {"kind": self.arch, "crop_size": self.crop_size, "augment": bool(augment)}
        if weights:
            self.missing_weights = load_backbone_weights(self.net, str(weights))

    def get_config(self) -> dict[str, Any]:
        """JSON config such that ``build_backbone(config)`` rebuilds this architecture (random weights)."""
        return dict(self._config)

    def feature_map(self, x: torch.Tensor) -> torch.Tensor:
        """Normalised ``(B, 3, S, S)`` -> the last convolutional map ``(B, d, h, w)``."""
        net = self.net
        if self.arch.startswith("timm:"):
            return net.forward_features(x)
        if self.arch.startswith("resnet"):
            x = net.maxpool(net.relu(net.bn1(net.conv1(x))))
            return net.layer4(net.layer3(net.layer2(net.layer1(x))))
        for name in (
            "Conv2d_1a_3x3",
            "Conv2d_2a_3x3",
            "Conv2d_2b_3x3",
            "maxpool1",
            "Conv2d_3b_1x1",
            "Conv2d_4a_3x3",
            "maxpool2",
            "Mixed_5b",
            "Mixed_5c",
            "Mixed_5d",
            "Mixed_6a",
            "Mixed_6b",
            "Mixed_6c",
            "Mixed_6d",
            "Mixed_6e",
            "Mixed_7a",
            "Mixed_7b",
            "Mixed_7c",
        ):
            x = getattr(net, name)(x)
        return x

    def forward(self, images: torch.Tensor) -> BackboneOutput:
        """images ``(B, 3, H, W)`` in [0, 1] -> pooled ``(B, d)``, features ``(B, d, h, w)``."""
        x = self.augmentation(images) if self.augmentation is not None else _centre_crop(images, self.crop_size)
        features = self.feature_map((x - self.mean) / self.std)
        return BackboneOutput(features.mean(dim=(2, 3)), features, (features.shape[2], features.shape[3]))


def drop_init_weights(model: nn.Module) -> nn.Module:
    """Remove the ``weights`` (initial weights source) of a :class:`StandardBackbone` config from a
    hub model's saved config, so that ``from_pretrained`` rebuilds it without that file (the
    trained weights come from the saved state dict anyway). Returns ``model``."""
    config = getattr(model, "_hub_mixin_config", None)
    if isinstance(config, dict) and isinstance(config.get("backbone"), dict):
        config["backbone"] = {k: v for k, v in config["backbone"].items() if k != "weights"}
    return model

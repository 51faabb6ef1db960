"""Configuration and fresh components of the world-trained Flux pipeline."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

from ..settings import setting
from ..validators import positive_int_list
from ..world.config import WorldConfig

__all__ = ["FluxTrainConfig", "TRAINING_WORLD"]


#: The world the Flux trains on by default: 32 px, canonical pose, plain scene (every part at
#: the same pixels, so small parts survive the VAE and no capacity goes to backgrounds).
TRAINING_WORLD = WorldConfig(image_size=32, pose="canonical", scene="plain")


@dataclass
class FluxTrainConfig:
    """Every training setting of ``concept-grounding train-flux`` (world, sizes, data, schedule);
    the fields a user sets are declared with :func:`~concept_grounding.settings.setting`, so
    their flags come from here.

    Attributes:
        world: the training renders' :class:`~concept_grounding.world.WorldConfig`: its
            ``image_size`` is the render and generation side in pixels (a multiple of
            ``8 * 2**(len(vae_blocks)-1) / 2``), ``class_names`` the species (``None``: SUB's
            33), ``seed`` seeds the renders and also the captions, initialisation and
            batches, and ``pose`` / ``zoom`` / ``scene`` how birds are drawn (default
            :data:`TRAINING_WORLD`: a canonical pose on a plain scene).
        per_class: training renders per species (after the held-out filter).
        vae_blocks: AutoencoderKL ``block_out_channels``; downsampling 2**(len - 1).
        latent_channels: VAE latent channels (transformer in_channels = 4x, 2x2 packing).
        vae_steps / vae_batch / vae_lr: VAE fit (L1 + MSE + kl_weight * KL, AdamW, cosine);
            ``vae_steps = 0`` (only with ``init_from``) keeps its VAE and latent factors as they are.
        text_width / text_layers: hidden size and depth of both text encoders.
        max_length: tokens (incl. specials) of both tokenizers = ``model_max_length`` =
            the ``max_sequence_length`` the pipeline must be called with.
        layers / single_layers / heads / head_dim: FluxTransformer2DModel size.
        steps: transformer steps; ``None`` -> calibrated from ``minutes`` after 20 steps; 0
            (only with ``init_from``) keeps its transformer and text encoders as they are.
        minutes: transformer wall-time budget used when ``steps`` is ``None``.
        batch / lr / warmup / ema / caption_dropout: transformer training (rectified flow,
            logit-normal t, AdamW with linear warm-up then cosine, EMA of all trained weights,
            caption replaced by "" with this probability for classifier-free guidance).
        checkpoint_every: steps between resumable checkpoints.
        vae_deviant_per_class / vae_part_weight: the VAE's attribute-preserving settings
            (:mod:`.vae`): deviation-rate-1 renders per class added to its training set, and
            lambda of its part-weighted pixel loss (0: plain L1 + MSE).
        init_from: a ``FluxPipeline`` folder of the same sizes (e.g. the shipped world Flux)
            whose VAE, text encoders and transformer start the training instead of a fresh
            initialisation; ``None`` trains from scratch.
        vae_decoder_only: fit only ``init_from``'s VAE decoder, on samples of its frozen
            encoder's posterior: the latent space (and its shift / scaling factors) stays the
            one ``init_from``'s transformer was trained on (:mod:`.vae`).
        guide_captions: probability of TDG's colour guide caption ``a photo of a bird with
            {S}`` (:func:`~.captions.caption_thresholds`; the other forms keep their proportions).
    """

    world: WorldConfig = TRAINING_WORLD
    per_class: int = setting(400, "training renders per species", parse=int)
    vae_blocks: tuple[int, ...] = setting(
        (16, 32, 64), "AutoencoderKL block widths, e.g. 32,64,128", parse=positive_int_list
    )
    latent_channels: int = setting(8, "VAE latent channels", parse=int)
    vae_steps: int = setting(800, "VAE training steps (0 with --init-from: keep its VAE)", parse=int)
    vae_batch: int = setting(32, "VAE batch size", parse=int)
    vae_lr: float = setting(1e-3, "VAE peak learning rate (cosine schedule)", parse=float)
    kl_weight: float = 3e-5
    text_width: int = 128
    text_layers: int = 2
    max_length: int = 24
    layers: int = setting(2, "double-stream transformer blocks", parse=int)
    single_layers: int = setting(4, "single-stream transformer blocks", parse=int)
    heads: int = setting(4, "transformer attention heads", parse=int)
    head_dim: int = setting(32, "transformer width per head (multiple of 4)", parse=int)
    steps: int | None = setting(
        None, "transformer steps (default: fit --minutes; 0 with --init-from: keep its transformer)", parse=int
    )
    minutes: float = setting(42.0, "transformer wall-time budget when --steps is not given", parse=float)
    batch: int = setting(32, "transformer batch size", parse=int)
    lr: float = setting(8e-4, "transformer peak learning rate (cosine schedule)", parse=float)
    warmup: int = setting(200, "transformer warm-up steps", parse=int)
    ema: float = 0.999
    caption_dropout: float = 0.1
    checkpoint_every: int = setting(200, "transformer steps between checkpoints", parse=int)
    vae_deviant_per_class: int = setting(
        0,
        "deviation-rate-1 renders per class added to the VAE's training set "
        "(attributes drawn independently of the species)",
        parse=int,
    )
    vae_part_weight: float = setting(
        0.0,
        "lambda of the VAE's part-weighted pixel loss (every part gets the same extra weight; 0: plain)",
        parse=float,
    )
    init_from: str | None = setting(
        None, "FluxPipeline folder of the same sizes (e.g. the shipped world Flux) to start from", parse=str
    )
    vae_decoder_only: bool = setting(
        False,
        "fit only the --init-from VAE's decoder (its encoder and latent space are "
        "kept, so its transformer stays valid)",
        action="store_true",
    )
    guide_captions: float = setting(
        0.20,
        "probability of TDG's colour guide caption 'a photo of a bird with {S}' "
        "(the other forms keep their proportions)",
        parse=float,
    )
    compositions: float = setting(
        0.0,
        "composition renders per species, as a fraction of --per-class: 1-3 birds in a "
        "varied scene and facing, captioned with their count, relation and action "
        "(ConceptBed's categories; 0: none)",
        parse=float,
    )

    def __post_init__(self) -> None:
        down = 2 ** (len(self.vae_blocks) - 1) * 2
        if self.world.image_size % down:
            raise ValueError(
                f"image_size must be a multiple of {down} for vae_blocks={self.vae_blocks}, got {self.world.image_size}"
            )
        if self.vae_steps < 0 or (self.vae_steps == 0 and not self.init_from):
            raise ValueError(f"vae_steps must be > 0 (or 0 with init_from: keep its VAE), got {self.vae_steps}")
        for name in ("per_class", "vae_batch", "batch", "max_length", "checkpoint_every"):
            if int(getattr(self, name)) <= 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)}")
        if self.steps is not None and (self.steps < 0 or (self.steps == 0 and not self.init_from)):
            raise ValueError(f"steps must be > 0 (or 0 with init_from: keep its transformer), got {self.steps}")
        if self.vae_decoder_only and not self.init_from:
            raise ValueError("vae_decoder_only needs init_from (the encoder whose latent space is kept)")
        if not 0.0 <= self.caption_dropout < 1.0:
            raise ValueError(f"caption_dropout must be in [0, 1), got {self.caption_dropout}")
        if self.vae_deviant_per_class < 0 or self.vae_part_weight < 0:
            raise ValueError("vae_deviant_per_class and vae_part_weight must be >= 0")
        if not 0.0 <= self.guide_captions < 1.0:
            raise ValueError(f"guide_captions must be in [0, 1), got {self.guide_captions}")
        if not 0.0 <= self.compositions <= 4.0:
            raise ValueError(f"compositions must be in [0, 4], got {self.compositions}")
        if self.head_dim % 4:
            raise ValueError(f"head_dim must be a multiple of 4, got {self.head_dim}")

    @property
    def mirror_augment(self) -> bool:
        """Whether training mirrors images at random: only a varied pose faces both ways
        (a mirrored canonical bird would face left, which the canonical world never draws);
        in a canonical world only the composition renders are mirrored."""
        return self.world.pose == "varied" or self.compositions > 0

    def to_dict(self) -> dict[str, Any]:
        """The saved form (``config.json``, ``train_log.json``): the world's settings as flat keys
        (``image_size``, ``class_names``, ``seed``, ``pose``, ``zoom``, ``scene``; ``deviation_rate``
        only when not the default), in the order of the files written before the world was nested."""
        w = self.world
        world = {
            "image_size": w.image_size,
            "class_names": list(w.class_names) if w.class_names is not None else None,
            "seed": w.seed,
            "pose": w.pose,
            "zoom": w.zoom,
            "scene": w.scene,
        }
        if w.deviation_rate != WorldConfig.deviation_rate:
            world["deviation_rate"] = w.deviation_rate
        own = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "world"}
        own["vae_blocks"] = list(self.vae_blocks)
        later = {
            k: own.pop(k) for k in ("vae_deviant_per_class", "vae_part_weight", "init_from", "vae_decoder_only")
        }  # the attribute-preserving VAE's
        if (
            own["guide_captions"] == FluxTrainConfig.guide_captions
        ):  # version 3's; absent from the files of earlier runs
            own.pop("guide_captions")
        else:
            later["guide_captions"] = own.pop("guide_captions")
        if own["compositions"] == FluxTrainConfig.compositions:  # absent from the files of earlier runs
            own.pop("compositions")
        else:
            later["compositions"] = own.pop("compositions")
        return {
            "image_size": world.pop("image_size"),
            "per_class": own.pop("per_class"),
            "class_names": world.pop("class_names"),
            **own,
            **world,
            **later,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> FluxTrainConfig:
        """Inverse of :meth:`to_dict` (unknown keys, such as the ``extra`` of older files, are
        ignored); a log written before the world settings existed was trained on the varied world."""
        d = {"pose": "varied", "scene": "varied", **d}
        world = {k: d[k] for k in ("image_size", "seed", "pose", "zoom", "scene", "deviation_rate") if k in d}
        if d.get("class_names") is not None:
            world["class_names"] = tuple(d["class_names"])
        known = {f.name for f in fields(cls)} - {"world"}
        own = {k: v for k, v in d.items() if k in known}
        own["vae_blocks"] = tuple(own.get("vae_blocks", cls.vae_blocks))
        return cls(world=WorldConfig(**{**asdict(TRAINING_WORLD), **world}), **own)


def build_vae(cfg: FluxTrainConfig) -> Any:
    """Fresh ``AutoencoderKL``: ``image_size`` RGB -> ``image_size / 2**(len(blocks)-1)`` latents."""
    from diffusers import AutoencoderKL

    n = len(cfg.vae_blocks)
    return AutoencoderKL(
        in_channels=3,
        out_channels=3,
        down_block_types=("DownEncoderBlock2D",) * n,
        up_block_types=("UpDecoderBlock2D",) * n,
        block_out_channels=tuple(cfg.vae_blocks),
        layers_per_block=1,
        latent_channels=cfg.latent_channels,
        norm_num_groups=min(32, min(cfg.vae_blocks)),
        sample_size=cfg.world.image_size,
        use_quant_conv=False,
        use_post_quant_conv=False,
    )


def build_text_encoders(cfg: FluxTrainConfig, vocab_size: int) -> tuple[Any, Any]:
    """Fresh (CLIPTextModel, T5EncoderModel), both ``text_width`` wide, no dropout."""
    from transformers import CLIPTextConfig, CLIPTextModel, T5Config, T5EncoderModel

    clip = CLIPTextModel(
        CLIPTextConfig(
            vocab_size=vocab_size,
            hidden_size=cfg.text_width,
            intermediate_size=cfg.text_width * 4,
            num_hidden_layers=cfg.text_layers,
            num_attention_heads=4,
            max_position_embeddings=cfg.max_length,
            projection_dim=cfg.text_width,
            pad_token_id=0,
            bos_token_id=1,
            eos_token_id=3,
        )
    )
    t5 = T5EncoderModel(
        T5Config(
            vocab_size=vocab_size,
            d_model=cfg.text_width,
            d_kv=cfg.text_width // 4,
            d_ff=cfg.text_width * 4,
            num_layers=cfg.text_layers,
            num_heads=4,
            relative_attention_num_buckets=16,
            dropout_rate=0.0,
            pad_token_id=0,
            eos_token_id=3,
            decoder_start_token_id=0,
        )
    )
    return clip, t5


def build_transformer(cfg: FluxTrainConfig) -> Any:
    """Fresh ``FluxTransformer2DModel`` (no guidance embedding: the model uses true CFG)."""
    from diffusers import FluxTransformer2DModel

    q = cfg.head_dim // 4  # RoPE axes (unused id axis, y, x) sum to head_dim
    return FluxTransformer2DModel(
        patch_size=1,
        in_channels=cfg.latent_channels * 4,
        num_layers=cfg.layers,
        num_single_layers=cfg.single_layers,
        attention_head_dim=cfg.head_dim,
        num_attention_heads=cfg.heads,
        joint_attention_dim=cfg.text_width,
        pooled_projection_dim=cfg.text_width,
        guidance_embeds=False,
        axes_dims_rope=(q, (cfg.head_dim - q) // 2, (cfg.head_dim - q) - (cfg.head_dim - q) // 2),
    )


def build_scheduler() -> Any:
    """The flow-matching Euler scheduler (shift 1, no dynamic shifting)."""
    from diffusers import FlowMatchEulerDiscreteScheduler

    return FlowMatchEulerDiscreteScheduler(num_train_timesteps=1000, shift=1.0, use_dynamic_shifting=False)

"""Configuration and fresh components of the world-trained Flux pipeline."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any

__all__ = ["FluxTrainConfig"]


@dataclass
class FluxTrainConfig:
    """Every setting of ``concept-grounding train-flux`` (sizes, data, schedule, seed).

    Attributes:
        image_size: render and generation side in pixels (multiple of 8 * 2**(len(vae_blocks)-1) / 2).
        per_class: training renders per species (after the held-out filter).
        class_names: CUB class folders; ``None`` -> SUB's 33 classes.
        vae_blocks: AutoencoderKL ``block_out_channels``; downsampling 2**(len - 1).
        latent_channels: VAE latent channels (transformer in_channels = 4x, 2x2 packing).
        vae_steps / vae_batch / vae_lr: VAE fit (L1 + MSE + kl_weight * KL, AdamW, cosine).
        text_width / text_layers: hidden size and depth of both text encoders.
        max_length: tokens (incl. specials) of both tokenizers = ``model_max_length`` =
            the ``max_sequence_length`` the pipeline must be called with.
        layers / single_layers / heads / head_dim: FluxTransformer2DModel size.
        steps: transformer steps; ``None`` -> calibrated from ``minutes`` after 20 steps.
        minutes: transformer wall-time budget used when ``steps`` is ``None``.
        batch / lr / warmup / ema / caption_dropout: transformer training (rectified flow,
            logit-normal t, AdamW with linear warm-up then cosine, EMA of all trained weights,
            caption replaced by "" with this probability for classifier-free guidance).
        checkpoint_every: steps between resumable checkpoints.
        seed: seeds the world (renders), captions, initialisation and batches.
        pose / zoom / scene: the training world's drawing settings
            (:class:`~concept_grounding.world.WorldConfig`); a canonical pose on a plain
            scene puts every part at the same pixels, so small parts (eyes, legs, bill)
            survive the VAE and the generator spends no capacity on backgrounds.
    """

    image_size: int = 32
    per_class: int = 400
    class_names: tuple[str, ...] | None = None
    vae_blocks: tuple[int, ...] = (16, 32, 64)
    latent_channels: int = 8
    vae_steps: int = 800
    vae_batch: int = 32
    vae_lr: float = 1e-3
    kl_weight: float = 3e-5
    text_width: int = 128
    text_layers: int = 2
    max_length: int = 24
    layers: int = 2
    single_layers: int = 4
    heads: int = 4
    head_dim: int = 32
    steps: int | None = None
    minutes: float = 42.0
    batch: int = 32
    lr: float = 8e-4
    warmup: int = 200
    ema: float = 0.999
    caption_dropout: float = 0.1
    checkpoint_every: int = 200
    seed: int = 0
    pose: str = "canonical"
    zoom: float = 1.0
    scene: str = "plain"
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        down = 2 ** (len(self.vae_blocks) - 1) * 2
        if self.image_size % down:
            raise ValueError(f"image_size must be a multiple of {down} for vae_blocks={self.vae_blocks}, got {self.image_size}")
        for name in ("per_class", "vae_steps", "vae_batch", "batch", "max_length", "checkpoint_every"):
            if int(getattr(self, name)) <= 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)}")
        if self.steps is not None and self.steps <= 0:
            raise ValueError(f"steps must be > 0, got {self.steps}")
        if not 0.0 <= self.caption_dropout < 1.0:
            raise ValueError(f"caption_dropout must be in [0, 1), got {self.caption_dropout}")
        if self.head_dim % 4:
            raise ValueError(f"head_dim must be a multiple of 4, got {self.head_dim}")
        self.world_config()  # validates pose / zoom / scene

    @property
    def mirror_augment(self) -> bool:
        """Whether training mirrors images at random: only a varied pose faces both ways
        (a mirrored canonical bird would face left, which the canonical world never draws)."""
        return self.pose == "varied"

    def world_config(self) -> Any:
        """The :class:`~concept_grounding.world.WorldConfig` of the training renders."""
        from ..world import WorldConfig

        return WorldConfig(image_size=self.image_size, class_names=self.class_names, seed=self.seed,
                           pose=self.pose, zoom=self.zoom, scene=self.scene)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["vae_blocks"] = list(self.vae_blocks)
        d["class_names"] = list(self.class_names) if self.class_names is not None else None
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "FluxTrainConfig":
        """Inverse of :meth:`to_dict`; a log written before the world settings existed was
        trained on the varied world."""
        known = {f.name for f in fields(cls)}
        d = {"pose": "varied", "scene": "varied", **{k: v for k, v in d.items() if k in known}}
        d["vae_blocks"] = tuple(d.get("vae_blocks", cls.vae_blocks))
        if d.get("class_names") is not None:
            d["class_names"] = tuple(d["class_names"])
        return cls(**d)


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
        sample_size=cfg.image_size,
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

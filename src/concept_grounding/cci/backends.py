"""Thin adapters that expose a CLIP ViT image tower through one interface.

CCI needs the same few handles from every CLIP implementation: the token embedding, the model's own
forward with keys cut out of every attention (:meth:`VisionBackend.mask_keys`, through each library's
extension point, :mod:`.attention`), the per-block maps of the fast path and the pooling head. Two
families: transformers ``CLIPModel`` / ``CLIPVisionModel(WithProjection)`` and open_clip ``CLIP`` /
``CustomTextCLIP`` / ``VisionTransformer``. :func:`get_backend` looks the adapter up by the name of
:func:`concept_grounding.models.clip.backend_for`'s backend (:data:`TOWERS`); any other tower (a ResNet,
attention or average pooling) raises a ``ValueError`` naming the problem. Manual: docs/cci.md.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

from .attention import check_batch, key_bias, library_attention, multihead_attention, transformers_key_mask

if TYPE_CHECKING:  # pragma: no cover
    import torch
    from torch import nn

    from ..models.clip import ClipBackend

__all__ = ["get_backend"]


@dataclass(frozen=True)
class BlockOps:
    """The pieces of one pre-norm transformer block, as callables on ``(..., D)`` tensors.

    ``x <- x + ls1(out(attend(q, k, v)))`` with ``q, k, v`` from ``qkv(norm1(x))``, then
    ``x <- x + ls2(mlp(norm2(x)))``. ``attend(q, k, v, bias=None)`` is the library's
    multi-head attention on ``(V, L, D)`` tensors with an optional additive bias
    broadcastable to ``(V, heads, Lq, Lk)``. ``q_proj`` computes the query alone, and
    ``key_value`` holds the key and value maps as ``(W_k, b_k, W_v, b_v)`` (``(D, D)``
    weights, ``(D,)`` biases or None); the CLS-only last layer of the fast path folds
    them into the query and the attention weights instead of projecting every token.
    """

    norm1: Callable[[Any], Any]
    qkv: Callable[[Any], tuple[Any, Any, Any]]
    q_proj: Callable[[Any], Any]
    key_value: tuple[Any, Any, Any, Any]
    attend: Callable[..., Any]
    out: Callable[[Any], Any]
    norm2: Callable[[Any], Any]
    mlp: Callable[[Any], Any]
    ls1: Callable[[Any], Any]
    ls2: Callable[[Any], Any]
    num_heads: int

    def forward(self, x: torch.Tensor, qkv: tuple | None = None, bias: torch.Tensor | None = None) -> torch.Tensor:
        """The whole block on ``(V, L, D)`` tokens -> ``(V, L, D)``.

        Args:
            x: block input.
            qkv: precomputed ``(q, k, v)`` of ``norm1(x)``, each ``(V, L, D)``, if given.
            bias: optional additive attention bias broadcastable to ``(V, heads, L, L)``.
        """
        q, k, v = qkv if qkv is not None else self.qkv(self.norm1(x))
        x = x + self.ls1(self.out(self.attend(q, k, v, bias)))
        return x + self.ls2(self.mlp(self.norm2(x)))


def _identity(x: Any) -> Any:
    return x


class VisionBackend:
    """Common interface over a CLIP ViT image tower.

    Attributes:
        model: the user's model (root module; its ``training`` flag is checked).
        encoder: the image encoder module (the layer stack run by :meth:`run_encoder`).
        num_heads: attention heads per layer.
        grid_size: ``(gh, gw)`` patch grid; ``num_tokens = 1 + gh * gw``.
        image_size: ``(H, W)`` input size in pixels.
    """

    name = "base"
    model: nn.Module
    tokenizer: Callable | None
    clip: ClipBackend  # the library's text and image encoding
    encoder: nn.Module
    num_heads: int
    grid_size: tuple[int, int]
    image_size: tuple[int, int]

    @property
    def num_patches(self) -> int:
        return self.grid_size[0] * self.grid_size[1]

    @property
    def num_tokens(self) -> int:
        return 1 + self.num_patches

    # -- model pieces --------------------------------------------------------------
    def embed(self, pixel_values: torch.Tensor) -> torch.Tensor:
        """``(B, 3, H, W)`` pixels -> ``(B, T, D)`` encoder input (pos-embedded, pre-normed)."""
        raise NotImplementedError

    def run_encoder(self, tokens: torch.Tensor) -> torch.Tensor:
        """Run the model's own encoder module on ``(B, T', D)`` tokens (any ``T'``)."""
        raise NotImplementedError

    def blocks(self) -> list[BlockOps]:
        """Per-layer :class:`BlockOps`, first layer first."""
        raise NotImplementedError

    def final_norm(self, tokens: torch.Tensor) -> torch.Tensor:
        """The final LayerNorm applied token-wise, ``(..., D) -> (..., D)``."""
        raise NotImplementedError

    def project(self, pooled: torch.Tensor) -> torch.Tensor:
        """Projection of the normalised CLS token into the joint space, ``(..., D) -> (..., E)``."""
        raise NotImplementedError

    def pool(self, tokens: torch.Tensor) -> torch.Tensor:
        """Image embedding from final encoder tokens ``(B, T, D) -> (B, E)`` (CLS pooling)."""
        return self.project(self.final_norm(tokens[:, 0]))

    def encode_image(self, pixel_values: torch.Tensor) -> torch.Tensor:
        """The user's own image forward, ``(B, 3, H, W) -> (B, E)`` (key masks apply)."""
        return self.clip.encode_image(self.model, pixel_values)

    def mask_keys(self, key_mask: torch.Tensor) -> contextlib.AbstractContextManager[None]:
        """Context in which the model's own image forwards cut ``key_mask``'s keys out of
        every layer's and head's attention.

        Args:
            key_mask: ``(V, T)`` bool (validated by the caller, :class:`~.masking.ClusterMask`);
                every encoder call inside must have batch ``V``, or it raises ``ValueError``.
        """
        raise NotImplementedError

    def encode_text(self, texts: Any) -> torch.Tensor:
        """Text embeddings ``(C, E)`` for a list of strings or a token-id tensor."""
        return self.clip.encode_text(self.model, self.tokenizer, texts)

    def check_eval(self) -> None:
        """Raise ``ValueError`` if any module is in train mode (dropout breaks exactness)."""
        if any(m.training for m in self.model.modules()):
            raise ValueError(
                "model is in train mode (models built from configs start that way); "
                "call model.eval() before explaining it"
            )


# ----------------------------------------------------------------------------- transformers
class TransformersCLIPBackend(VisionBackend):
    """Adapter for transformers ``CLIPModel`` / ``CLIPVisionModel[WithProjection]``."""

    name = "transformers"

    def __init__(self, model: nn.Module, tokenizer: Callable | None = None) -> None:
        from ..models.clip.backends import TRANSFORMERS

        if "clip" not in type(model).__module__:
            head = getattr(getattr(model, "vision_model", model), "head", None)  # SigLIP's attention pooling
            why = (
                f"pools its image tokens with an attention head ({type(head).__name__}), not a CLS token, "
                "and CCI cuts clusters out of the CLS token's attention"
                if head is not None
                else "is not a transformers CLIP model"
            )
            raise ValueError(f"model: {type(model).__name__} {why}")
        self.model = model
        self.tokenizer = tokenizer
        self.clip = TRANSFORMERS
        vision = model.vision_model if hasattr(model, "vision_model") else model
        # transformers < 5 nests a CLIPVisionTransformer one level deeper
        if not hasattr(vision, "encoder") and hasattr(vision, "vision_model"):
            vision = vision.vision_model
        for attr in ("embeddings", "pre_layrnorm", "encoder", "post_layernorm"):
            if not hasattr(vision, attr):
                raise ValueError(f"model: transformers vision tower lacks {attr!r}; not a CLIP ViT")
        self.vision = vision
        self.encoder = vision.encoder
        #: the config object every vision attention module dispatches on
        self.attention_config = vision.encoder.layers[0].self_attn.config if len(vision.encoder.layers) else None
        self.projection = getattr(model, "visual_projection", None)
        cfg = vision.config if hasattr(vision, "config") else model.config.vision_config
        self.num_heads = int(cfg.num_attention_heads)
        side = int(cfg.image_size) // int(cfg.patch_size)
        self.grid_size = (side, side)
        self.image_size = (int(cfg.image_size), int(cfg.image_size))

    def embed(self, pixel_values):
        return self.vision.pre_layrnorm(self.vision.embeddings(pixel_values))

    def run_encoder(self, tokens):
        out = self.encoder(inputs_embeds=tokens)
        return out.last_hidden_state if hasattr(out, "last_hidden_state") else out[0]

    def blocks(self) -> list[BlockOps]:
        ops = []
        for layer in self.encoder.layers:
            att = layer.self_attn

            def qkv(x, att=att):
                return att.q_proj(x), att.k_proj(x), att.v_proj(x)

            kv = (att.k_proj.weight, att.k_proj.bias, att.v_proj.weight, att.v_proj.bias)
            ops.append(
                BlockOps(
                    norm1=layer.layer_norm1,
                    qkv=qkv,
                    q_proj=att.q_proj,
                    key_value=kv,
                    attend=partial(library_attention, att),
                    out=att.out_proj,
                    norm2=layer.layer_norm2,
                    mlp=layer.mlp,
                    ls1=_identity,
                    ls2=_identity,
                    num_heads=int(att.num_heads),
                )
            )
        return ops

    def final_norm(self, tokens):
        return self.vision.post_layernorm(tokens)

    def project(self, pooled):
        return self.projection(pooled) if self.projection is not None else pooled

    def mask_keys(self, key_mask):
        """Through transformers' ``AttentionInterface`` (:func:`~.attention.transformers_key_mask`)."""
        if not hasattr(self.model, "set_attn_implementation") or self.attention_config is None:
            raise ValueError(
                f"model: {type(self.model).__name__} cannot switch its attention implementation; "
                "pass the CLIPModel or CLIPVisionModel[WithProjection] itself"
            )
        return transformers_key_mask(self.model, self.attention_config, key_mask)


# ----------------------------------------------------------------------------- open_clip
class OpenCLIPBackend(VisionBackend):
    """Adapter for an open_clip ``VisionTransformer`` (``model.visual``) with CLS pooling."""

    name = "open_clip"

    def __init__(self, model: nn.Module, tokenizer: Callable | None = None) -> None:
        from open_clip.transformer import VisionTransformer

        from ..models.clip.backends import OPEN_CLIP

        visual = getattr(model, "visual", model)
        if not isinstance(visual, VisionTransformer):
            raise ValueError(
                f"model: open_clip image tower is {type(visual).__name__}, not a VisionTransformer; CCI needs a ViT"
            )
        if getattr(visual, "attn_pool", None) is not None or getattr(visual, "pool_type", "tok") != "tok":
            raise ValueError("model: CCI needs CLS-token pooling (pool_type='tok', no attentional pooler)")
        self.model = model
        self.visual = visual
        self.tokenizer = tokenizer
        self.clip = OPEN_CLIP
        self.encoder = visual.transformer
        first = visual.transformer.resblocks[0]
        attn = getattr(first, "attn", None)
        self.num_heads = int(attn.num_heads)
        self.grid_size = tuple(int(g) for g in visual.grid_size)
        self.image_size = tuple(int(s) for s in visual.image_size)

    def embed(self, pixel_values):
        return self.visual._embeds(pixel_values)

    def run_encoder(self, tokens):
        return self.encoder(tokens)

    def blocks(self) -> list[BlockOps]:
        import torch
        import torch.nn.functional as F

        ops = []
        for blk in self.encoder.resblocks:
            att = blk.attn
            if not isinstance(att, torch.nn.MultiheadAttention) or att.in_proj_weight is None:  # separate q/k/v weights
                raise ValueError(
                    f"model: block type {type(blk).__name__} is not supported by the fast path; use method='hook'"
                )
            if att.bias_k is not None or att.add_zero_attn or hasattr(blk, "ln_1_kv"):
                raise ValueError("model: attention with bias_k/add_zero_attn is not supported; use method='hook'")
            d = att.embed_dim
            w, b = att.in_proj_weight, att.in_proj_bias

            def qkv(x, w=w, b=b):
                return F.linear(x, w, b).chunk(3, dim=-1)

            def q_proj(x, w=w, b=b, d=d):
                return F.linear(x, w[:d], None if b is None else b[:d])

            def attend(q, k, v, bias=None, heads=int(att.num_heads)):
                return multihead_attention(q, k, v, heads, bias)

            kv = (w[d : 2 * d], None if b is None else b[d : 2 * d], w[2 * d :], None if b is None else b[2 * d :])
            ops.append(
                BlockOps(
                    norm1=blk.ln_1,
                    qkv=qkv,
                    q_proj=q_proj,
                    key_value=kv,
                    attend=attend,
                    out=att.out_proj,
                    norm2=blk.ln_2,
                    mlp=blk.mlp,
                    ls1=blk.ls_1,
                    ls2=blk.ls_2,
                    num_heads=int(att.num_heads),
                )
            )
        return ops

    def final_norm(self, tokens):
        return self.visual.ln_post(tokens)

    def project(self, pooled):
        return pooled @ self.visual.proj if self.visual.proj is not None else pooled

    @contextlib.contextmanager
    def mask_keys(self, key_mask) -> Iterator[None]:
        """A forward pre-hook on ``visual.transformer`` passes the key bias as ``attn_mask``;
        the hook is removed on exit, also when the body raises."""
        heads = self.num_heads

        def add_key_bias(module: Any, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
            x = args[0] if args else kwargs["x"]  # (V, T, D), batch first
            check_batch(key_mask, x.shape[0], x.shape[1])
            if kwargs.get("attn_mask") is not None:
                raise ValueError("model: the image encoder already receives an attn_mask; cannot combine")
            v, t = key_mask.shape
            # nn.MultiheadAttention wants (V * heads, T, T); a float mask is added to the logits
            bias = key_bias(key_mask.to(x.device), x.dtype).expand(v, heads, t, t).reshape(v * heads, t, t)
            return args, {**kwargs, "attn_mask": bias}

        handle = self.encoder.register_forward_pre_hook(add_key_bias, with_kwargs=True)
        try:
            yield
        finally:
            handle.remove()

    def encode_text(self, texts):
        """Strings without a tokenizer are read with open_clip's bundled BPE (``ViT-B-16``)."""
        import torch

        if self.tokenizer is None and not isinstance(texts, torch.Tensor):
            import open_clip

            self.tokenizer = open_clip.get_tokenizer("ViT-B-16")
        return super().encode_text(texts)


#: the tower adapter of each :class:`~concept_grounding.models.clip.ClipBackend`, by its name.
TOWERS: dict[str, type[VisionBackend]] = {
    "open_clip": OpenCLIPBackend,
    "world": OpenCLIPBackend,
    "transformers": TransformersCLIPBackend,
}


def get_backend(model: Any, tokenizer: Callable | None = None) -> VisionBackend:
    """The tower adapter for ``model``: a :class:`~concept_grounding.models.clip.ClipHandle`, or a
    transformers or open_clip CLIP (or the world's ``WorldCLIP``) whose backend
    :func:`~concept_grounding.models.clip.backend_for` picks (a :class:`VisionBackend` is
    returned unchanged).

    Raises:
        ValueError: ``model`` is neither a transformers CLIP nor an open_clip ViT.
    """
    if isinstance(model, VisionBackend):
        return model
    from ..models.clip import ClipHandle, backend_for

    if not isinstance(model, ClipHandle):
        try:
            clip = backend_for(model)
        except ValueError:
            raise ValueError(
                f"model: {type(model).__name__} is not a supported CLIP ViT (transformers "
                "CLIPModel/CLIPVisionModel or open_clip CLIP with a VisionTransformer)"
            ) from None
        model = ClipHandle(
            model,
            tokenizer or getattr(model, "tokenizer", None) if clip.name == "world" else tokenizer,
            lambda images: images,
            clip,
        )
    return TOWERS[model.backend.name](model.tower(), tokenizer or model.tokenizer)

"""The tiny Flux for tests: the builders of :mod:`concept_grounding.tdg.tiny` and a random FLUX IP-Adapter."""

from __future__ import annotations

from typing import Any

from ..tdg.tiny import tiny_flux_components, tiny_flux_pipeline

__all__ = ["tiny_flux_components", "tiny_flux_pipeline", "tiny_flux_ip_adapter"]


def tiny_flux_ip_adapter(transformer: Any, seed: int = 0, num_tokens: int = 4) -> dict[str, dict[str, Any]]:
    """A random FLUX IP-Adapter for ``transformer``, in the layout ``FluxPipeline.load_ip_adapter`` reads.

    ``image_proj``: image embeddings (``pooled_projection_dim`` wide) -> ``num_tokens`` text-width
    tokens (a linear map and a layer norm); ``ip_adapter``: per double-stream block ``i``, the
    key/value maps ``i.to_k_ip`` / ``i.to_v_ip`` from the text width to the attention width.
    Deterministic in ``seed``; the global RNG is untouched. Load it with
    ``pipe.load_ip_adapter(state, weight_name="", image_encoder_pretrained_model_name_or_path=None)``.
    """
    import torch

    config = transformer.config
    text, width = config.joint_attention_dim, config.num_attention_heads * config.attention_head_dim
    generator = torch.Generator().manual_seed(seed)

    def rand(*shape: int) -> Any:
        return torch.randn(*shape, generator=generator) * 0.1

    image_proj = {
        "proj.weight": rand(num_tokens * text, config.pooled_projection_dim),
        "proj.bias": rand(num_tokens * text),
        "norm.weight": torch.ones(text),
        "norm.bias": torch.zeros(text),
    }
    ip_adapter = {}
    for i in range(config.num_layers):
        for name in ("to_k_ip", "to_v_ip"):
            ip_adapter[f"{i}.{name}.weight"], ip_adapter[f"{i}.{name}.bias"] = rand(width, text), rand(width)
    return {"image_proj": image_proj, "ip_adapter": ip_adapter}

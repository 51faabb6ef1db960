"""The world Flux's training objective: FluxPipeline's rectified-flow loss and its prompt encoding.

The loss is the rectified-flow MSE (``x_t = (1 - t) x_0 + t eps``, target ``eps - x_0``; Esser et al.,
Eq. 2 and Sec. 3.1) on packed 2x2 latent tokens; the prompts are encoded as ``FluxPipeline.encode_prompt``
does. The training loop: :mod:`.train`; the stages: the world Flux's model card (``assets/world_flux/README.md``).
"""

from __future__ import annotations

from typing import Any

__all__ = ["encode_prompts", "flow_matching_loss"]


def flow_matching_loss(
    transformer: Any,
    x0: Any,
    noise: Any,
    t: Any,
    prompt_embeds: Any,
    pooled: Any,
    img_ids: Any,
    txt_ids: Any,
    guidance: Any = None,
) -> Any:
    """Rectified-flow MSE in FluxPipeline's convention.

    Args:
        x0: (B, C, h, w) normalised latents ``(z - shift) * scaling``.
        noise: like ``x0``; t: (B,) in (0, 1).
        prompt_embeds: (B, L, D) T5 states; pooled: (B, D) CLIP pooled output.
        guidance: (B,) guidance-embedding values of a guidance-distilled transformer
            (``guidance_embeds``, e.g. FLUX.1-dev); ``None`` for one without.
    Returns:
        scalar ``mean((v_theta(x_t, t) - (noise - x0))**2)`` on packed 2x2 latent tokens.
    """
    from diffusers import FluxPipeline

    b, c, h, w = x0.shape
    tt = t.view(b, 1, 1, 1)
    xt = (1.0 - tt) * x0 + tt * noise
    target = noise - x0
    packed = FluxPipeline._pack_latents(xt, b, c, h, w)
    pred = transformer(
        hidden_states=packed,
        timestep=t,
        guidance=guidance,
        pooled_projections=pooled,
        encoder_hidden_states=prompt_embeds,
        txt_ids=txt_ids,
        img_ids=img_ids,
        return_dict=False,
    )[0]
    return ((pred - FluxPipeline._pack_latents(target, b, c, h, w)) ** 2).mean()


def encode_prompts(
    tokenizers: tuple[Any, Any], encoders: tuple[Any, Any], prompts: list[str], max_length: int
) -> tuple[Any, Any]:
    """(T5 states (B, L, D), CLIP pooled (B, D)) exactly as FluxPipeline.encode_prompt computes
    them (on the encoders' device)."""
    clip_tok, t5_tok = tokenizers
    clip, t5 = encoders
    ids = clip_tok(
        prompts, padding="max_length", max_length=clip_tok.model_max_length, truncation=True, return_tensors="pt"
    ).input_ids
    pooled = clip(ids.to(clip.device), output_hidden_states=False).pooler_output
    ids2 = t5_tok(prompts, padding="max_length", max_length=max_length, truncation=True, return_tensors="pt").input_ids
    states = t5(ids2.to(t5.device), output_hidden_states=False)[0]
    return states, pooled

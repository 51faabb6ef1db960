from .clip import (
    known_answer_open_clip,
    save_clip_bpe_tokenizer,
    save_tiny_transformers_clip,
    tiny_open_clip,
    tiny_transformers_clip,
    vit_b16_open_clip_visual,
)
from .flux import tiny_flux_components, tiny_flux_ip_adapter, tiny_flux_pipeline
from .flux2 import TINY_FLUX2_CALL, tiny_flux2_components, tiny_flux2_pipeline
from .inpaint import TINY_INPAINT_WORDS, save_tiny_inpainting_pipeline
from .serving import free_port, http_request, stop_server, wait_until_serving
from .vlm import TINY_VLM_CHAT_TEMPLATE, save_tiny_internvl, save_tiny_vlm, tiny_vlm_words
from .world_clip import TINY_WORLD_CLIP, tiny_clip_handle, tiny_world_clip

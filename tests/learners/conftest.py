"""A held-out world species (never seen by the world Flux) as a concept folder of 8 renders."""

from dataclasses import replace

import pytest


@pytest.fixture(scope="session")
def concept_dir(tmp_path_factory):
    from PIL import Image

    from concept_grounding.world import BirdWorld
    from concept_grounding.worldflux.components import TRAINING_WORLD

    folder = tmp_path_factory.mktemp("concept")
    world = BirdWorld(replace(TRAINING_WORLD, class_names=("001.Black_footed_Albatross",)))
    for i, sample in enumerate(world.samples(range(8))):
        Image.fromarray(sample.image).save(folder / f"{i:02d}.png")
    return folder


@pytest.fixture(scope="session")
def sample():
    """``sample(pipe)``: the pipeline's latents for "a photo of <v*>" (2 steps, 32 px, fixed noise)."""
    import torch

    def latents(pipe):
        return pipe(
            "a photo of <v*>",
            negative_prompt="",
            true_cfg_scale=4.0,
            num_inference_steps=2,
            height=32,
            width=32,
            max_sequence_length=24,
            output_type="latent",
            generator=torch.Generator().manual_seed(0),
        ).images

    return latents

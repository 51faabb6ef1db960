"""Hugging Face Space entry point: a thin shell over ``concept_grounding.space``."""

from concept_grounding.space.env import configure_environment

configure_environment()  # offline / no-telemetry defaults, before Gradio is imported

from concept_grounding.space import build_demo, launch  # noqa: E402

demo = build_demo()

if __name__ == "__main__":
    import os

    launch(demo, host=os.environ.get("GRADIO_SERVER_NAME", "0.0.0.0"), port=int(os.environ.get("GRADIO_SERVER_PORT", "7860")))

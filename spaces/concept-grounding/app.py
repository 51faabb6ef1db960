"""Hugging Face Space entry point: a thin shell over ``concept_grounding.space``.

Model policy (which models visitors may load, how many stay loaded) comes from the same
flags as ``concept-grounding space`` (``--tdg-model``, ``--clip-model``,
``--allow-any-model``, ``--model-cache``) or, on a hosted Space, their environment
variables (see ``concept_grounding.space.policy``). Models come from a bench run in
``$CONCEPT_GROUNDING_ARTIFACTS`` or are trained at first use at the sizes of
``$CONCEPT_GROUNDING_SPACE_BUILD`` (``default`` or ``tiny``; ``concept_grounding.space.builds``).
"""

import argparse
import os
import sys

from concept_grounding.space.env import configure_environment

configure_environment()  # offline / no-telemetry defaults, before Gradio is imported

from concept_grounding.commands.space import add_model_arguments, policy_from_args  # noqa: E402
from concept_grounding.space import build_demo, launch  # noqa: E402

_parser = argparse.ArgumentParser(description="concept-grounding Space", add_help=False, allow_abbrev=False)
add_model_arguments(_parser)
_args, _ = _parser.parse_known_args(sys.argv[1:])  # `gradio app.py` passes its own arguments
demo = build_demo(policy=policy_from_args(_args))

if __name__ == "__main__":
    from concept_grounding.progress import log_lines

    # 127.0.0.1 as `concept-grounding space`; a hosted Space sets GRADIO_SERVER_NAME=0.0.0.0 itself
    with log_lines():  # the package's log lines, as `concept-grounding space`
        launch(
            demo,
            host=os.environ.get("GRADIO_SERVER_NAME", "127.0.0.1"),
            port=int(os.environ.get("GRADIO_SERVER_PORT", "7860")),
        )

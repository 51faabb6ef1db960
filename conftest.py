"""Test-wide settings: the suite never touches the network (no weights or datasets can be
downloaded on our machines), and torch uses one thread per xdist worker."""

import os

for _name, _value in {
    "HF_HUB_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "HF_EVALUATE_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_HUB_DISABLE_TELEMETRY": "1",
    "GRADIO_ANALYTICS_ENABLED": "False",
    "MPLBACKEND": "Agg",
}.items():
    os.environ.setdefault(_name, _value)

import torch  # noqa: E402
from hypothesis import settings  # noqa: E402

torch.set_num_threads(1)

# CI runs the property tests on a fixed example sequence (no flaky red builds); locally they explore.
settings.register_profile("ci", derandomize=True, deadline=None)
settings.load_profile("ci" if os.environ.get("CI") else "default")

# The Hugging Face libraries bind their log handler to the ``sys.stderr`` of their first logger
# call. Make that call here, under the session's capture, so that it is never a test's ``capsys``
# stream (closed after that test: a later warning then printed '--- Logging error ---').
import diffusers.utils.logging as _diffusers_logging  # noqa: E402
import transformers.utils.logging as _transformers_logging  # noqa: E402

_diffusers_logging.get_logger("diffusers")
_transformers_logging.get_logger("transformers")

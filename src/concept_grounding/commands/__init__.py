"""Sub-commands of the ``concept-grounding`` CLI, one module each."""

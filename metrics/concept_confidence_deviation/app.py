"""The concept_confidence_deviation metric Space: ``concept_grounding.space.metric_widget`` (a JSON box for every
compute() argument; evaluate's own widget sends only the feature columns)."""

from concept_grounding.space.metric_widget import launch_metric_space

launch_metric_space(__file__)

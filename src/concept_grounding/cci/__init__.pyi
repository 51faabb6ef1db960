from .backends import get_backend
from .clusters import kmeans
from .explainers import EXPLAINERS, Explainer, Explanation, build_explainer
from .importance import (
    CCIOutput,
    ClusterEmbeddings,
    ConceptClusterImportance,
    cluster_weights,
    importance_map,
    similarity_drops,
)
from .masking import ClusterMask

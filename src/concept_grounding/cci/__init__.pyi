from .backends import get_backend
from .clusters import kmeans
from .importance import (CCIOutput, ClusterEmbeddings, ConceptClusterImportance, cluster_weights, importance_map,
                         similarity_drops)
from .masking import ClusterMask
from .explainers import EXPLAINERS, Explainer, Explanation, build_explainer

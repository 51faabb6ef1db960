from .backgrounds import BACKGROUNDS, Background
from .concepts import CLASS_CONCEPTS, CONCEPTS, class_concept_matrix, photos_dataset_dict
from .export import PhotosConfig, PhotosResult, run_photos
from .stamps import STAMPS, Stamp, fetch_stamps

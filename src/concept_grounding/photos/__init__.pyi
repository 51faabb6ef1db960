from .backgrounds import BACKGROUNDS, Background
from .export import PhotosConfig, PhotosResult, run_photos
from .stamps import STAMPS, Stamp, fetch_stamps

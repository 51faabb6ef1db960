from .build import PublishConfig, build_repos, plan_repos, publish_command
from .layout import MARKER, HubRepo
from .push import PushResult, push_repos, resolve_token
from .world_data import WorldSpec

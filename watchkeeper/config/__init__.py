"""The one configuration: a pydantic model per section, loaded and validated once, passed down.

model     Config and the measuring sections ([database], [server], [profiles.*], [bench], ...)
daemon    [daemon]: scheduling, fleet identity, observability
tracker   [tracker] and [review]: where findings are filed, which PRs are reviewed
loader    find the file, parse TOML, turn validation errors into one line naming file and key
paths     where things live on disk (cache, data, project checkout)
durations human durations (`8h`, `1h30m`) to seconds and back: the config validates with them
"""

from watchkeeper.config.daemon import DaemonConfig
from watchkeeper.config.loader import CONFIG_ENV, find_config_file, load_config, parse_config
from watchkeeper.config.model import (
    DEFAULT_LLAMA_CPP_VERSION,
    BenchConfig,
    Config,
    DatabaseConfig,
    DetectorConfig,
    DigestConfig,
    ModelConfig,
    NightlyConfig,
    ProfileConfig,
    ServerConfig,
    SoakConfig,
)
from watchkeeper.config.tracker import ReviewConfig, TrackerConfig

__all__ = [
    "CONFIG_ENV",
    "DEFAULT_LLAMA_CPP_VERSION",
    "BenchConfig",
    "Config",
    "DaemonConfig",
    "DatabaseConfig",
    "DetectorConfig",
    "DigestConfig",
    "ModelConfig",
    "NightlyConfig",
    "ProfileConfig",
    "ReviewConfig",
    "ServerConfig",
    "SoakConfig",
    "TrackerConfig",
    "find_config_file",
    "load_config",
    "parse_config",
]

"""Typed config (``schema``), YAML presets and overrides (``loader``), and the skeleton (``skeleton``)."""

from config.loader import ConfigError, load_config, save_config
from config.schema import Config

__all__ = ["Config", "ConfigError", "load_config", "save_config"]

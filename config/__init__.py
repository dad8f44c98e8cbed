"""Typed config (``schema``), YAML presets, overrides, validation and saving (``config_file``), and the skeleton
(``skeleton``)."""

from simplepose.config.config_file import ConfigError, load_config, save_config
from simplepose.config.schema import Config

__all__ = ["Config", "ConfigError", "load_config", "save_config"]

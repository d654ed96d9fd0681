"""Where voicecli keeps things on disk, following the XDG base-directory conventions."""

from __future__ import annotations

from pathlib import Path

import platformdirs

APP = "voicecli"


def user_config_file() -> Path:
    """The user's config file: $XDG_CONFIG_HOME/voicecli/config.toml (~/.config/voicecli/config.toml)."""
    return Path(platformdirs.user_config_dir(APP)) / "config.toml"


def default_models_dir() -> Path:
    """Default models directory: $XDG_DATA_HOME/voicecli/models (~/.local/share/voicecli/models)."""
    return Path(platformdirs.user_data_dir(APP)) / "models"


def default_state_dir() -> Path:
    """Logs and session timelines: $XDG_STATE_HOME/voicecli (~/.local/state/voicecli)."""
    return Path(platformdirs.user_state_dir(APP))

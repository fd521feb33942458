"""Root conftest: the plugin's own tests use pytester (enabled in pyproject addopts)."""

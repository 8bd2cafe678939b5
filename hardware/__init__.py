"""GPU catalog: one TOML file per GPU, every number with its source (see README.md here)."""

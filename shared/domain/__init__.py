"""Pure rules of the pipelines: no I/O, no Azure SDKs, no environment."""

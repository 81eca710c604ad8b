"""What a request names: the model source, the target, instances, model configs, the toolchain's versions."""

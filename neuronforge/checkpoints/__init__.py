"""A checkpoint's bytes: verification, quantization, streamed safetensors."""

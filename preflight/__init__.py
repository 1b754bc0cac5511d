"""preflight: pre-flight readiness checks for PaddlePaddle distributed training clusters."""

__version__ = "0.1.0"

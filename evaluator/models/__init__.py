"""The model check: whole models run with our kernels installed, compared with eager PyTorch."""

"""The runtime backend's machinery: which kernels to install and where they are faster; evaluator.backend is the public face."""

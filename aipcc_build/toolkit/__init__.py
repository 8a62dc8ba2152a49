"""Toolkit facts: a library under the stages (render, validate, publish and compat read it).

`components`: NVIDIA's CUDA components, which release each version belongs to, the pip and
RPM names of a release's components (`data/cuda-components.json`). `facts`: drivers, GPU
architectures, ROCm releases (`data/compat.yaml`). It imports nothing of the stages.
"""

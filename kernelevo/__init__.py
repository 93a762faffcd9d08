"""kernelevo: evolutionary search with LLM mutation operators for faster, verified Triton kernels."""
__version__ = "0.1.0"

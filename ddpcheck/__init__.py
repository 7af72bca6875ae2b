"""ddpcheck: is this allocation ready for PyTorch distributed training?"""

__version__ = "0.1.0"

"""kernelevo's own Triton kernels that seeds are made of where Inductor leaves a library call (``conv.py``: any
``torch.convolution``; ``attention.py``: scaled dot product attention's forward) or torch.compile captures nothing
(``rnn.py``: nn.LSTM and nn.GRU); ``libdevice_cpu.py``, ``libdevice_bessel.py``: libdevice's functions in ``tl``
arithmetic, for Triton's interpreter, which runs none of libdevice. Each file is standalone (torch and triton
only): a seed holds a copy of its text."""

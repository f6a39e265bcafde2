"""Hand-written backward passes in torch ops (not kernels: nothing here is dispatched).

- :mod:`.predictor_gemms`: GMM cross-attention's predictor FFNs with the bias inside the GEMM
  and the sigmoid's backward in place (Zhang & Feng 2021, eq. 7-9 and 14).
"""

"""Hand-written backward passes in torch ops (not kernels: nothing here is dispatched).

- :mod:`.band_windows`: the band kernel's key windows per query block and its chunked fused
  CPU attention, each with the backward that folds the window gradients back.
- :mod:`.predictor_gemms`: GMM cross-attention's predictor FFNs with the bias inside the GEMM
  and the sigmoid's backward in place (Zhang & Feng 2021, eq. 7-9 and 14).
"""

"""Data preparation: the embedded gettext corpus, WMT14 En-De, WMT17 Zh-En.

Submodules import lazily; nothing here touches fairseq or torch.
"""

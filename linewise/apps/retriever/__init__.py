"""The learned line retriever: its training data (pages and traces), its training and
its evaluation.

The trainable encoder is in ``base`` (where the float all-MiniLM-L6-v2 comes from, and
its checks), ``encoder`` (its forward pass in JAX), ``train`` (contrastive fine-tuning on
the CPU) and ``export`` (the int8 ONNX weights folder with its manifest). A trained
folder is loaded at run time by ``linewise.agent.text.learned``, which needs no JAX;
nothing is imported here, so that importing the package imports no JAX either.
"""

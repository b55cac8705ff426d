"""crossbench's PyTorch worker: model.py builds a torch module from a network graph."""

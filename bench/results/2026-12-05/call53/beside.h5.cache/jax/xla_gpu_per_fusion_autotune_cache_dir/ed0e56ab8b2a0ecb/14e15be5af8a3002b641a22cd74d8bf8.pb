
J
4
ed0e56ab8b2a0ecb 14e15be5af8a3002b641a22cd74d8bf8
fe9062d0fff82a66

€€€13.0.0

J
4
ed0e56ab8b2a0ecb 0803cc0a019eb3d902d469b740fa716b
fe9062d0fff82a66

€€€13.0.0

J
4
ed0e56ab8b2a0ecb 2ba83f6574b56b9c69b99d644182dc82
fe9062d0fff82a66

€€€13.0.0
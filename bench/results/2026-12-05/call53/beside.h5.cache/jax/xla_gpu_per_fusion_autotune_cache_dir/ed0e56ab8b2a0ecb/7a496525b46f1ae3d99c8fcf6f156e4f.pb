
J
4
ed0e56ab8b2a0ecb 7a496525b46f1ae3d99c8fcf6f156e4f
fe9062d0fff82a66
""2êÄıl9.19.0